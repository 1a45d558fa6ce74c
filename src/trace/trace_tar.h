/* trace_tar.h - the regular files of a tar archive in memory (POSIX ustar,
 * pax and GNU tar, as PARAM, HTA and Chakra publish traces: a .tar.gz of
 * per-rank files). Names are the members' paths (pax "path" records and
 * GNU long names applied).
 * What it is not: a writer, or an extractor to disk. */
#ifndef SHARDSIM_TRACE_TAR_H
#define SHARDSIM_TRACE_TAR_H

#include <stddef.h>

#include "shardsim/status.h"

typedef struct {
    char *name;          /* the member's path in the archive */
    size_t off, size;    /* its bytes: buf[off .. off + size) */
} shs__tar_member_t;

/* Whether buf starts with a tar header: 512 bytes whose checksum (POSIX.1
 * "chksum", the sum of the header's bytes with the field taken as blanks)
 * matches and whose magic is "ustar" (POSIX) or "ustar  " (GNU). */
int shs__is_tar(const char *buf, size_t len);
/* The archive's regular files, in archive order (directories, links,
 * devices and pax / GNU extension headers are not files). An archive ends
 * at two zero blocks or at its last member.
 * Errors: SHS_PARSE "name: tar header at byte N: ..." (bad checksum, a
 * size that is no octal number or runs past the archive), SHS_HOST_OOM. */
shs_status_t shs__tar_members(const char *name, const char *buf, size_t len, shs__tar_member_t **out, size_t *n);
void shs__tar_members_free(shs__tar_member_t *m, size_t n);

#endif
