/* Profiler: device time per kernel and per transfer, from OpenCL event profiling.
 *
 * Two ways to use it:
 *
 *   - Without code changes: run the program with CLTENSOR_PROFILE=1. Recording is on from the
 *     start, and ct_shutdown() prints the summary table to stderr, or writes it to the file
 *     named by CLTENSOR_PROFILE_FILE (created or truncated by each ct_shutdown(); stderr, with
 *     a note, when it cannot be written). Nothing is printed when no command was recorded.
 *
 *   - From code:
 *       ct_profile_start();            // before the device's first use, see below
 *       ... run the work ...
 *       ct_profile_dump(stderr);       // or ct_profile_dump_to_file("profile.txt")
 *       ct_profile_reset();            // start a new measurement
 *
 * The table has one section per device: op (a kernel's name, or a transfer such as "h2d"),
 * calls, total device time in ms, mean time per call in us, and the op's share of the
 * device's total, largest first, e.g.
 *
 *   cltensor profile: cpu:0 (pthread-skylake-avx512-AMD EPYC)
 *   op                                           calls     total ms      mean us  share %
 *   add_contig                                    1000        3.120        3.120     71.2
 *   h2d                                              2        1.262      631.000     28.8
 *   total                                         1002        4.382                 100.0
 *
 * Time is device time, from CL_PROFILING_COMMAND_START to CL_PROFILING_COMMAND_END of each
 * command, so host overhead and queueing gaps are not counted. Recording does not block: events
 * are resolved in batches once they have completed, and the dump waits for the rest.
 * Some GEMM rows are timed differently, because no single OpenCL command does their work:
 *   - GEMM through CLBlast ("CLBlastSgemm", "CLBlastSgemmStridedBatched", ...): CLBlast runs
 *     several kernels per call (padding, transposing, the product) and reports only its last,
 *     so a row spans from the end of the command before the call to the end of CLBlast's last
 *     kernel; on an idle device that includes CLBlast's host-side work between its kernels.
 *   - GEMM through the host BLAS on CPU devices ("cblas_sgemm (host)"): a native kernel, timed
 *     like any command, where the device runs native kernels (PoCL); elsewhere the host wall
 *     time of the BLAS call on the mapped buffers.
 *
 * Queues and timing. OpenCL only times commands on a queue created with profiling enabled, and
 * a device's queue is created when the device is first used. CLTENSOR_PROFILE=1, or a call to
 * ct_profile_start() before a device's first use, gets such a queue. A device already in use
 * when ct_profile_start() is called keeps its queue (swapping the queue under other threads'
 * feet would not be safe): its calls are counted but have no times, and the dump says so for
 * that device. Once ct_profile_start() has been called, every queue created later has
 * profiling enabled.
 *
 * Cost. When the profiler is off, a launch creates no event and pays one relaxed atomic load.
 * When it is on, each command costs an event and a short locked bookkeeping step.
 *
 * Thread safety. Every function here may be called from any thread, while other threads run
 * ops; the recorded totals are exact under concurrency. Data is per process and per device; it
 * is discarded by ct_profile_reset() and by ct_shutdown() (dump before shutting down). */
#ifndef CLTENSOR_PROFILE_H
#define CLTENSOR_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cltensor/device.h"
#include "cltensor/export.h"
#include "cltensor/status.h"

CT_BEGIN_DECLS

/* Turns recording on (also when CLTENSOR_PROFILE is unset) and makes queues created from now
 * on profiling-capable. Already-recorded data is kept. Always returns CT_OK. */
CT_API ct_status ct_profile_start(void);

/* Turns recording off; recorded data is kept and can still be dumped. Also overrides
 * CLTENSOR_PROFILE=1 for the rest of the run (ct_profile_start() turns it back on). */
CT_API void ct_profile_stop(void);

/* True while recording. */
CT_API bool ct_profile_is_enabled(void);

/* Discards every recorded entry (recording stays on or off as it was). */
CT_API void ct_profile_reset(void);

/* Writes the table described above to f (sections only for devices with recorded commands;
 * "cltensor profile: no commands recorded" when there are none). Waits for the recorded
 * commands to finish so their times are known.
 * Returns CT_OK; CT_ERR_INVALID_ARGUMENT for a NULL f; CT_ERR_IO when writing fails. */
CT_API ct_status ct_profile_dump(FILE *f);

/* As ct_profile_dump() into the file at path (created or truncated).
 * Returns CT_OK; CT_ERR_INVALID_ARGUMENT for a NULL path; CT_ERR_IO (with the path and the
 * system's reason) when the file cannot be written. */
CT_API ct_status ct_profile_dump_to_file(const char *path);

/* One row of the table, for programs that process the figures themselves. */
typedef struct ct_profile_entry {
  size_t size;             /* set by the caller in out[0] to sizeof(ct_profile_entry), see below */
  const ct_device *device; /* borrowed; valid until ct_shutdown() */
  char op[64];             /* NUL-terminated; longer names are cut */
  uint64_t calls;          /* commands recorded */
  uint64_t timed_calls;    /* of which have a device time (see "Queues and timing") */
  double total_ms;         /* device time of the timed calls */
} ct_profile_entry;

/* OUT: up to capacity rows into out (out may be NULL when capacity is 0), grouped by device in
 * ct_device_get() order, each device's rows by total time, largest first; *count receives the
 * number of rows there are (which may exceed capacity: call again with a larger array). Waits
 * for the recorded commands to finish, like ct_profile_dump().
 * Caller-filled, so that the struct can grow without breaking programs built before: with
 * capacity > 0 the caller sets out[0].size to sizeof(ct_profile_entry), which is also the
 * array's stride; the library fills at most that many bytes of each row, its own layout's, and
 * sets each filled row's size to the bytes it filled.
 * Returns CT_OK; CT_ERR_INVALID_ARGUMENT for a NULL count, a NULL out with capacity > 0, or an
 * out[0].size below this layout's (0 when unset) or not a multiple of its alignment. */
CT_API ct_status ct_profile_get_entries(ct_profile_entry *out, size_t capacity, size_t *count);

CT_END_DECLS

#endif
