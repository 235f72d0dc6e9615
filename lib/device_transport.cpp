// The device transport (lib/device_transport.hpp).
#include "device_transport.hpp"

#include "context.hpp"

namespace tsr {
namespace device {

tsr_status attach(const Comm&) { return TSR_SUCCESS; }
void detach(const Comm&) {}

}  // namespace device
}  // namespace tsr
