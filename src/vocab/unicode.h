/*
 * The bits of Unicode the tokenizers need, with b1892's exact semantics:
 *
 * - utf8_seq_len(): the length b1892 assumes for a UTF-8 sequence from its
 *   first byte alone (high nibble lookup; continuation and invalid bytes
 *   count as 1). The SPM tokenizer and the special-token scan split text
 *   this way without validating it.
 * - unicode_decode_b1892(): b1892's strict-ish decoder (codepoints_from_utf8
 *   in its unicode.h): overlong forms and surrogates are accepted, stray
 *   continuation bytes, truncated sequences and lead bytes 0xF8..0xFF are
 *   not, nor (on re-encoding) values above 0x10FFFF.
 * - unicode_cpt_class(): the code point classes of b1892's GPT-2 pre-split
 *   (codepoint_type in its unicode.h), reduced to the four it distinguishes.
 * - The GPT-2 byte <-> code point mapping used by byte-level BPE.
 */
#ifndef LLAMAC_VOCAB_UNICODE_H
#define LLAMAC_VOCAB_UNICODE_H

#include <stddef.h>
#include <stdint.h>

enum unicode_class {
    UNICODE_CLASS_OTHER = 0,      /* everything else, incl. b1892's "CJK" override */
    UNICODE_CLASS_DIGIT,
    UNICODE_CLASS_LETTER,
    UNICODE_CLASS_WHITESPACE,
};

/* 1..4 from the high nibble of the first byte (0x0-0xB -> 1, 0xC/0xD -> 2, 0xE -> 3, 0xF -> 4). */
static inline size_t utf8_seq_len(uint8_t first) {
    static const uint8_t lookup[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    return lookup[first >> 4];
}

/* Decodes one code point at s[0..n) as b1892's decoder does. Returns the
 * bytes used (1..4), or 0 for a sequence it rejects. n must be > 0. The
 * value may exceed 0x10FFFF (lead bytes 0xF4..0xF7): b1892 decodes those but
 * throws when it re-encodes them. */
size_t unicode_decode_b1892(const uint8_t *s, size_t n, uint32_t *cp);

/* Encodes cp (<= 0x10FFFF) as UTF-8 into out; returns 1..4, or 0 if cp is too large. */
size_t unicode_encode(uint32_t cp, uint8_t out[4]);

enum unicode_class unicode_cpt_class(uint32_t cp);

/* GPT-2's reversible byte -> printable code point map and its inverse
 * (-1 for a code point that is not the image of any byte). */
uint32_t unicode_byte_to_bpe_cpt(uint8_t byte);
int unicode_bpe_cpt_to_byte(uint32_t cp);

#endif
