/*
 * tessera energy accounting (C99): machine profiles, energy per region,
 * real counters where present, reports. Included by tessera.h; conventions
 * as there (every call returns a tsr_status, messages via tsr_last_error,
 * collective vs local stated per call). See docs/ENERGY.md.
 *
 * Two ledgers per rank and region:
 *  - application payload: what the caller handed over (tsr_counters: p2p
 *    bytes, collective payload sent/received), exact;
 *  - moved bytes per level: what the algorithm put on each link or device
 *    (self, intra-node, inter-node, host<->device, device<->device, disk
 *    read, disk write): exact for point-to-point and disk, modelled for
 *    collectives (the algorithm each collective is assumed to use is stated
 *    in docs/ACCOUNTING.md and in every report).
 * A machine profile turns moved bytes (and flops, if counted) into modelled
 * joules with a [low, high] range. Where RAPL (Linux powercap) or NVML can be
 * read, the report also gives measured joules per region; where none can be
 * read it says "model only", never a zero presented as a measurement.
 */
#ifndef TESSERA_ENERGY_H
#define TESSERA_ENERGY_H

#include "tessera/tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------- */
/* Levels and measured domains (numbers are ABI)                              */
/* ------------------------------------------------------------------------- */
typedef enum tsr_level {
  TSR_LEVEL_SELF = 0,          /* a rank's messages to itself (a memory copy)        */
  TSR_LEVEL_INTRA_NODE = 1,    /* between ranks of one shared-memory node            */
  TSR_LEVEL_INTER_NODE = 2,    /* between nodes                                      */
  TSR_LEVEL_HOST_DEVICE = 3,   /* host <-> device copies, both directions            */
  TSR_LEVEL_DEVICE_DEVICE = 4, /* device <-> device within a node                    */
  TSR_LEVEL_DISK_READ = 5,     /* bytes read from files by the I/O layer             */
  TSR_LEVEL_DISK_WRITE = 6,    /* bytes written to files by the I/O layer            */
  TSR_LEVELS = 7
} tsr_level;

typedef enum tsr_energy_domain {
  TSR_DOMAIN_PACKAGE = 0, /* RAPL package zones of the node (CPU sockets), summed */
  TSR_DOMAIN_DRAM = 1,    /* RAPL DRAM zones of the node, summed                  */
  TSR_DOMAIN_GPU = 2,     /* NVML total energy of the node's GPUs, summed         */
  TSR_DOMAINS = 3
} tsr_energy_domain;

/* ------------------------------------------------------------------------- */
/* Machine profiles                                                           */
/* ------------------------------------------------------------------------- */
typedef struct tsr_energy_profile_s* tsr_energy_profile;

/* One figure of a profile: pJ per byte (levels) or pJ per flop. */
typedef struct tsr_energy_coeff {
  double value;       /* typical                                                   */
  double low, high;   /* range: low <= value <= high                               */
  const char* source; /* where the figure comes from; lives as long as the profile */
  const char* origin; /* the profile it came from: "default-2025" or a file name   */
} tsr_energy_coeff;

/* Load a machine profile (JSON, format in docs/ENERGY.md). path NULL or "":
 * the file named by the environment variable TSR_ENERGY_PROFILE if it is set
 * and not empty, else the built-in default "default-2025". A file overrides
 * the default level by level: levels it does not list keep the default
 * figures (see tsr_energy_coeff.origin). Errors: TSR_ERR_IO (the file cannot
 * be read; the message names it), TSR_ERR_INVALID_ARG (NULL output, or a
 * malformed profile: the message names the file and the line and column of a
 * syntax error, or the key of a bad, unknown or duplicate entry). Local. */
TSR_API tsr_status tsr_energy_profile_load(const char* path, tsr_energy_profile* profile);
/* The same from a JSON text in memory (overrides the default). Local. */
TSR_API tsr_status tsr_energy_profile_parse(const char* json, tsr_energy_profile* profile);
/* Free a profile; sets *profile to NULL (NULL is a no-op). Local. */
TSR_API tsr_status tsr_energy_profile_destroy(tsr_energy_profile* profile);
/* The profile's name; file: the file it was read from ("" for the built-in
 * default or a string). Either output may be NULL. Local. */
TSR_API tsr_status tsr_energy_profile_name(tsr_energy_profile profile, const char** name,
                                           const char** file);
/* The figure of a level. Local. INVALID_ARG: level out of range, NULL. */
TSR_API tsr_status tsr_energy_profile_level(tsr_energy_profile profile, tsr_level level,
                                            tsr_energy_coeff* out);
/* The per-flop figure; *present = 0 (and *out zeros) if the profile has none. Local. */
TSR_API tsr_status tsr_energy_profile_flop(tsr_energy_profile profile, tsr_energy_coeff* out,
                                           int* present);
/* The static power of a rank, in watts (value, low, high): what planners
 * charge per rank for the modelled time (docs/ENERGY.md, "Planning by
 * energy"); zeros if the profile has none. Local. */
TSR_API tsr_status tsr_energy_profile_static(tsr_energy_profile profile, tsr_energy_coeff* out);
/* The power usage effectiveness multiplier applied to every modelled joule. Local. */
TSR_API tsr_status tsr_energy_profile_pue(tsr_energy_profile profile, double* pue);

/* ------------------------------------------------------------------------- */
/* Measuring on a context: real counters, flops, communication matrix         */
/* ------------------------------------------------------------------------- */
#define TSR_METER_RAPL 1 /* Linux powercap (intel-rapl zones: package, dram) */
#define TSR_METER_NVML 2 /* NVIDIA NVML, loaded at run time with dlopen      */
#define TSR_METERS_NONE 0
#define TSR_METERS_AUTO (TSR_METER_RAPL | TSR_METER_NVML)

/* Settings for tsr_energy_start. Initialise with TSR_ENERGY_CONFIG_INIT. */
typedef struct tsr_energy_config {
  size_t size;                /* sizeof(tsr_energy_config), set by the initialiser  */
  unsigned int magic;         /* TSR_ENERGY_CONFIG_MAGIC, set by the initialiser    */
  int meters;                 /* TSR_METERS_AUTO (default), TSR_METERS_NONE, or a
                                 mask of TSR_METER_RAPL and TSR_METER_NVML            */
  const char* powercap_root;  /* NULL: "/sys/class/powercap"                        */
  const char* nvml_library;   /* NULL: "libnvidia-ml.so.1"                          */
  int comm_matrix;            /* non-zero: record, per region, the bytes and
                                 messages this rank sends to every context rank     */
} tsr_energy_config;

#define TSR_ENERGY_CONFIG_MAGIC 0x3e7e9a11u
#define TSR_ENERGY_CONFIG_INIT \
  {sizeof(tsr_energy_config), TSR_ENERGY_CONFIG_MAGIC, TSR_METERS_AUTO, NULL, NULL, 0}

/* Start measuring on ctx. The meters are opened on one rank per
 * shared-memory node (the node's lowest rank of the context; real nodes, also
 * when the context simulates nodes) and read there at every region begin and
 * end from now on; their energy is the node's, and a report attributes it to
 * that rank. A meter that cannot be read (no powercap zone, permission
 * denied, no NVML) is not an error: the report says "model only" and why.
 * With comm_matrix, the transport also records the bytes sent to every rank.
 * Calling it again restarts with the new settings. config may be NULL
 * (defaults). Collective over ctx. Errors: INVALID_ARG (config not
 * initialised with TSR_ENERGY_CONFIG_INIT, unknown meter bits, settings that
 * differ across ranks), STATE (a region other than "total" is open: meters
 * must see whole regions). */
TSR_API tsr_status tsr_energy_start(tsr_context ctx, const tsr_energy_config* config);
/* Close the meters and stop the matrix (what was recorded stays). A context
 * without tsr_energy_start is a no-op. Collective over ctx. STATE: a region
 * other than "total" is open. */
TSR_API tsr_status tsr_energy_stop(tsr_context ctx);
/* Read the meters now and fold the reading into the open regions. Regions
 * read them at begin and end anyway; call this inside regions longer than a
 * few minutes, so that no RAPL counter wraps twice between two reads (a
 * 32-bit RAPL counter wraps after about 25 minutes at 170 W). Local (a no-op
 * on ranks that hold no meter). */
TSR_API tsr_status tsr_energy_sample(tsr_context ctx);
/* Which domains this rank's meters read (bit d: tsr_energy_domain d; 0 on
 * ranks without meters) and a description (e.g. "RAPL: 2 package zone(s), 2
 * dram zone(s) under /sys/class/powercap; NVML: not present (...)"). The
 * string lives until the next tsr_energy_start/stop on ctx. Local. */
TSR_API tsr_status tsr_energy_meter_status(tsr_context ctx, int* domains, const char** text);
/* Charge flops to the innermost open region (for the per-flop figure of a
 * profile). Local. */
TSR_API tsr_status tsr_flops_add(tsr_context ctx, uint64_t flops);

/* What this rank recorded in a region besides tsr_counters. */
typedef struct tsr_region_extra {
  uint64_t flops;                     /* charged with tsr_flops_add                      */
  uint64_t nanoseconds;               /* wall time spent inside the region               */
  uint64_t entries;                   /* times the region was entered                    */
  uint64_t measured_uj[TSR_DOMAINS];  /* microjoules read by this rank's meters          */
  uint64_t measured_mask;             /* bit d: domain d was read over the whole region  */
} tsr_region_extra;

/* This rank's extra counters of a region path ("total": since the context
 * was created or reset; its measured energy: since tsr_energy_start). Open
 * regions read up to now. Local. INVALID_ARG: unknown path, NULL. */
TSR_API tsr_status tsr_region_extra_get(tsr_context ctx, const char* path, tsr_region_extra* out);

/* ------------------------------------------------------------------------- */
/* Energy reports                                                             */
/* ------------------------------------------------------------------------- */
typedef struct tsr_energy_report_s* tsr_energy_report;

/* One rank's figures for one region, or a statistic over ranks. Moved bytes
 * at the link levels (self, intra-node, inter-node) are the bytes this rank
 * sent: point-to-point payload plus the modelled collective wire traffic, so
 * that summed over ranks every byte counts once; the profile's figure is the
 * end-to-end energy of a byte, both ends included. Host<->device counts both
 * directions; disk read and write are separate levels. Library-internal
 * control traffic is not in these levels (it is reported apart). */
typedef struct tsr_energy_estimate {
  uint64_t moved_bytes[TSR_LEVELS];
  uint64_t moved_messages[TSR_LEVELS]; /* link levels only; 0 for the others           */
  uint64_t flops;
  double seconds;                      /* wall time in the region                        */
  double joules[TSR_LEVELS];           /* modelled: bytes x pJ/B x PUE (typical)         */
  double joules_low[TSR_LEVELS];       /* the same with the profile's low figures        */
  double joules_high[TSR_LEVELS];      /* ... and high figures                           */
  double flop_joules, flop_joules_low, flop_joules_high; /* 0 if no flop figure       */
  double total_joules, total_joules_low, total_joules_high; /* all levels + flops    */
  double measured_joules[TSR_DOMAINS]; /* measured; meaningful only where the bit of
                                          measured_mask is set                          */
  int measured_mask;                   /* bit d: domain d measured over the region      */
  int measured_ranks;                  /* statistics: ranks that hold a measurement     */
} tsr_energy_estimate;

typedef enum tsr_stat {
  TSR_STAT_MIN = 0,
  TSR_STAT_MEAN = 1,
  TSR_STAT_MAX = 2,
  TSR_STAT_SUM = 3
} tsr_stat;

typedef enum tsr_output_format {
  TSR_OUTPUT_TABLE = 0,     /* readable text                                      */
  TSR_OUTPUT_JSON = 1,      /* tessera-energy-report/1, docs/ENERGY.md             */
  TSR_OUTPUT_CSV = 2,       /* one row per region and rank, and per statistic      */
  TSR_OUTPUT_MATRIX_CSV = 3 /* rank x rank bytes per region (needs comm_matrix)    */
} tsr_output_format;

/* Take a snapshot of every rank's ledgers and meter readings and convert them
 * with profile (NULL: tsr_energy_profile_load(NULL)). Every rank gets the
 * statistics over ranks (min, mean, max, sum) of every region present on any
 * rank; rank root also gets every rank's figures and the communication
 * matrix. The report's own traffic is not in it. Collective over ctx.
 * Errors: INVALID_ARG (root, NULL output, root or profile differing across
 * ranks), IO or INVALID_ARG from loading the default profile. */
TSR_API tsr_status tsr_energy_report_create(tsr_context ctx, tsr_energy_profile profile, int root,
                                            tsr_energy_report* report);
/* Free a report; sets *report to NULL (NULL is a no-op). Local. */
TSR_API tsr_status tsr_energy_report_destroy(tsr_energy_report* report);
/* Regions (sorted by path, region 0 is "total") and their paths. Local. */
TSR_API tsr_status tsr_energy_report_region_count(tsr_energy_report report, int* count);
TSR_API tsr_status tsr_energy_report_region_path(tsr_energy_report report, int region,
                                                 const char** path);
/* Index of a region path; TSR_ERR_INVALID_ARG if the report has none. Local. */
TSR_API tsr_status tsr_energy_report_find(tsr_energy_report report, const char* path, int* region);
/* One rank's figures: on the root any rank, elsewhere only the calling rank
 * (INVALID_ARG otherwise). Local. */
TSR_API tsr_status tsr_energy_report_rank(tsr_energy_report report, int region, int rank,
                                          tsr_energy_estimate* out);
/* A statistic over ranks, field by field (measured fields: over the ranks
 * that hold a measurement of the region, one per node). Local. */
TSR_API tsr_status tsr_energy_report_stat(tsr_energy_report report, int region, tsr_stat stat,
                                          tsr_energy_estimate* out);
/* *measured = 1 if any rank measured anything, and the report's energy source
 * line: "model only (...why...)" or "measured and modelled (...)". The string
 * lives as long as the report. Either output may be NULL. Local. */
TSR_API tsr_status tsr_energy_report_source(tsr_energy_report report, int* measured,
                                            const char** text);
/* The communication matrix of a region on the root: bytes[from * size + to]
 * and messages[...] (either may be NULL), len = size * size entries. STATE:
 * no matrix recorded (tsr_energy_config.comm_matrix) or not the root. Local. */
TSR_API tsr_status tsr_energy_report_matrix(tsr_energy_report report, int region, uint64_t* bytes,
                                            uint64_t* messages, size_t len);
/* Format the report (like snprintf: at most len bytes including the 0;
 * *needed gets the full length, so len = 0 asks for the size). On the root:
 * every rank and the statistics; elsewhere the statistics only. STATE:
 * TSR_OUTPUT_MATRIX_CSV without a matrix, or off the root. Local. */
TSR_API tsr_status tsr_energy_report_format(tsr_energy_report report, tsr_output_format format,
                                            char* buf, size_t len, size_t* needed);
/* Write the formatted report to a file: written under a temporary name in
 * the same directory, then renamed over path. IO: the message names the file.
 * Local (normally called on the root only). */
TSR_API tsr_status tsr_energy_report_write(tsr_energy_report report, tsr_output_format format,
                                           const char* path);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_ENERGY_H */
