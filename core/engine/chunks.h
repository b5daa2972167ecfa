/*
 * chunks.h - inputs larger than the device's memory: stage 1's inputs cut
 * on record boundaries into chunks that a memory budget (--device-memory,
 * else the GPU's free memory) holds with the tables beside them, mapped one
 * after another into the same tables; under --device both, into pieces the
 * two engines take as they go.
 */
#ifndef SOREN_ENGINE_CHUNKS_H
#define SOREN_ENGINE_CHUNKS_H

#include <stddef.h>

#include "../base/adapt.h"
#include "../base/stage.h"
#include "../error.h"
#include "../io/input.h"
#include "options.h"

/* --device both cuts stage 1's input into BOTH_PIECES pieces, for the
 * engines to take as they go: more where the GPU's chunk is smaller (a
 * large input's pieces are the GPU's chunks), fewer where a piece would be
 * under BOTH_PIECE_MIN bytes. */
enum { BOTH_PIECES = 16, BOTH_PIECE_MIN = 1 << 20 };

/* Stage 1's inputs cut into chunks of budget / CHUNK_SHARE bytes, at most
 * CHUNK_MOST, where one is larger than that (lines and fixed records in
 * host memory; the others stay whole), so that the engine maps them one
 * after another into the same tables; under --device both, into
 * BOTH_PIECES pieces.  *chunks stays NULL when nothing is cut; c says how. */
soren_status soren__plan_chunks(const soren_stage_spec *spec, const soren_run_options *o,
                                soren_device where, const soren_input *inputs, size_t n,
                                soren_input **chunks, size_t *count, soren_chunking *c,
                                soren_error *err);

#endif /* SOREN_ENGINE_CHUNKS_H */
