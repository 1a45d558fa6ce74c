/* le_bytes.h - little-endian encoding of integers and floats for the file
 * formats written here (checkpoints, safetensors), whatever the host's byte
 * order. Internal to the library. */
#ifndef SHARDSIM_LE_BYTES_H
#define SHARDSIM_LE_BYTES_H

#include <stddef.h>
#include <stdint.h>

/* Little-endian encoding, whatever the host. */
static inline void shs__put_le32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void shs__put_le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint32_t shs__get_le32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static inline uint64_t shs__get_le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
/* n floats from host order to little-endian bytes in place (no-op on
 * little-endian hosts); its own inverse. */
void shs__f32_to_le(float *x, size_t n);

#endif
