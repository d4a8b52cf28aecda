/*
 * The IQ2_XXS and IQ2_XS codebooks (data in iq2_tables.c).
 *
 * codes[k]: the 8 magnitude levels (2 bits each, value i in bits 2i..2i+1) of
 * grid point k; grid[k]: the same point as 8 magnitude bytes (8, 25 or 43,
 * value i in byte i), the form dequantization multiplies by the scale.
 */
#ifndef LLAMAC_QUANT_IQ2_TABLES_H
#define LLAMAC_QUANT_IQ2_TABLES_H

#include <stdint.h>

#define IQ2_XXS_GRID_SIZE 256
#define IQ2_XS_GRID_SIZE 512

extern const uint16_t iq2_xxs_codes[IQ2_XXS_GRID_SIZE];
extern const uint64_t iq2_xxs_grid[IQ2_XXS_GRID_SIZE];
extern const uint16_t iq2_xs_codes[IQ2_XS_GRID_SIZE];
extern const uint64_t iq2_xs_grid[IQ2_XS_GRID_SIZE];

/* Sign byte for a 7-bit sign index: bit i set = value i negative; the eighth
 * sign makes the number of negatives even. */
static inline uint8_t iq2_sign_byte(unsigned idx7) {
    return (uint8_t)(idx7 | ((unsigned)__builtin_parity(idx7) << 7));
}

#endif
