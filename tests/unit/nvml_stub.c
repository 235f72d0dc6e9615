/* A stand-in for libnvidia-ml.so.1, loaded by the tests through the same
 * dlopen path as the real library. Behaviour from the environment:
 *   TSR_NVML_STUB_INIT     return code of nvmlInit_v2 (default 0)
 *   TSR_NVML_STUB_ENERGY   comma-separated per-GPU total energy in mJ, read at
 *                          every call; "ns" for a GPU that does not support
 *                          it (NVML_ERROR_NOT_SUPPORTED = 3). Default "0". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char* field(int i, char* buf, size_t len) {
  const char* s = getenv("TSR_NVML_STUB_ENERGY");
  if (s == NULL) s = "0";
  for (int k = 0; k < i && s; ++k) {
    s = strchr(s, ',');
    if (s) ++s;
  }
  if (s == NULL) return NULL;
  size_t n = strcspn(s, ",");
  if (n >= len) n = len - 1;
  memcpy(buf, s, n);
  buf[n] = '\0';
  return buf;
}

int nvmlInit_v2(void) {
  const char* s = getenv("TSR_NVML_STUB_INIT");
  return s ? atoi(s) : 0;
}
int nvmlShutdown(void) { return 0; }
const char* nvmlErrorString(int rc) {
  static char buf[64];
  snprintf(buf, sizeof buf, "stub error %d", rc);
  return buf;
}
int nvmlDeviceGetCount_v2(unsigned* n) {
  char buf[64];
  unsigned k = 0;
  while (field((int)k, buf, sizeof buf) != NULL) ++k;
  *n = k;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** dev) {
  *dev = (void*)(size_t)(i + 1);
  return 0;
}
int nvmlDeviceGetTotalEnergyConsumption(void* dev, unsigned long long* mj) {
  char buf[64];
  const char* f = field((int)((size_t)dev - 1), buf, sizeof buf);
  if (f == NULL) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
  if (strcmp(f, "ns") == 0) return 3;
  *mj = strtoull(f, NULL, 10);
  return 0;
}
