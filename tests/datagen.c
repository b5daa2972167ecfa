#include "datagen.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static char **make_vocabulary(uint64_t *rng, size_t count)
{
    static const char *const pieces[] = {"a", "b", "c", "e", "th", "ing", "ed", "x", "Q",
                                         "7", "-", ".", "\\", "\xc3\xa9", "\xe6\x97\xa5",
                                         "\xff", "\x80", "'", "z", "o"};
    size_t npieces = sizeof pieces / sizeof pieces[0];
    char **words = calloc(count, sizeof *words);
    cr_assert_not_null(words);
    for (size_t i = 0; i < count; i++) {
        char buf[64] = "";
        size_t parts = 1 + tu_rand_below(rng, 5);
        for (size_t j = 0; j < parts; j++)
            strcat(buf, pieces[tu_rand_below(rng, npieces)]);
        words[i] = strdup(buf);
        cr_assert_not_null(words[i]);
    }
    return words;
}

static FILE *open_out(const char *path)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot write %s", path);
    return f;
}

void dg_text(const char *path, size_t bytes, uint64_t seed)
{
    static const char *const separators[] = {" ", " ", " ", "  ", "\t", "\n", "\n", "\r\n",
                                             "\v", "\f", "\n\n", " \r "};
    uint64_t rng = seed;
    size_t vocab = 30000;
    char **words = make_vocabulary(&rng, vocab);
    FILE *f = open_out(path);
    size_t written = 0;
    if (tu_rand_below(&rng, 2))
        written += (size_t)fprintf(f, "  ");
    while (written < bytes) {
        /* u^3 skews towards low indexes: a few words are very frequent. */
        double u = (double)(tu_rand(&rng) >> 11) / 9007199254740992.0;
        size_t w = (size_t)((double)vocab * u * u * u);
        written += (size_t)fprintf(f, "%s%s", words[w], separators[tu_rand_below(&rng, 12)]);
    }
    fputs("last-line-without-newline", f);
    fclose(f);
    for (size_t i = 0; i < vocab; i++)
        free(words[i]);
    free(words);
}

void dg_text_shape(const char *path, size_t bytes, dg_shape shape, uint64_t seed)
{
    uint64_t rng = seed;
    FILE *f = open_out(path);
    size_t written = 0;
    char word[10241];
    while (written < bytes) {
        switch (shape) {
        case DG_ONE_KEY:
            written += (size_t)fprintf(f, "same%s", tu_rand_below(&rng, 8) ? " " : "\n");
            break;
        case DG_DISTINCT:
            written += (size_t)fprintf(f, "w%zx\n", written);
            break;
        case DG_LONG_WORDS: {
            /* A few distinct 10 KB words, each seen many times. */
            uint64_t which = tu_rand_below(&rng, 4);
            for (size_t i = 0; i < sizeof word - 1; i++)
                word[i] = (char)('a' + (i * 7 + which * 3 + i / 26) % 26);
            word[sizeof word - 1] = '\0';
            written += (size_t)fprintf(f, "%s\n", word);
            break;
        }
        case DG_EMPTY_LINES:
            written += (size_t)fprintf(f, tu_rand_below(&rng, 16) ? "\n" : "word%u\n",
                                       (unsigned)tu_rand_below(&rng, 100));
            break;
        case DG_NO_NEWLINE:
            written += (size_t)fprintf(f, "t%u ", (unsigned)tu_rand_below(&rng, 5000));
            break;
        case DG_LONG_AMONG_SHORT:
            if (tu_rand_below(&rng, 4000) == 0) {
                for (size_t line = 0; line < (128u << 10);)
                    line += (size_t)fprintf(f, "l%u ", (unsigned)tu_rand_below(&rng, 3000));
                written += 128u << 10;
            }
            written += (size_t)fprintf(f, "s%u s%u\n", (unsigned)tu_rand_below(&rng, 700),
                                       (unsigned)tu_rand_below(&rng, 50));
            break;
        }
    }
    fclose(f);
}

void dg_rgb(const char *path, size_t pixels, uint64_t seed)
{
    uint64_t rng = seed;
    FILE *f = open_out(path);
    uint8_t buf[3 * 4096];
    size_t done = 0;
    while (done < pixels) {
        size_t n = pixels - done < 4096 ? pixels - done : 4096;
        for (size_t i = 0; i < 3 * n; i++) {
            uint64_t r = tu_rand(&rng);
            buf[i] = (uint8_t)(i % 3 == 2 ? (r % 200) : (r & 0xff) & ((r >> 8) & 0xff));
        }
        cr_assert_eq(fwrite(buf, 3, n, f), n);
        done += n;
    }
    fclose(f);
}

void dg_kv32(const char *path, size_t records, uint32_t keys, uint64_t seed)
{
    FILE *f = open_out(path);
    uint64_t rng = seed;
    for (size_t i = 0; i < records; i++) {
        uint32_t kv[2] = {(uint32_t)tu_rand_below(&rng, keys), (uint32_t)tu_rand(&rng)};
        cr_assert_eq(fwrite(kv, sizeof kv, 1, f), 1);
    }
    cr_assert_eq(fclose(f), 0);
}
