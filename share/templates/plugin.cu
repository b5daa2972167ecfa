/* @NAME@: a Soren job, started with `soren-host new @NAME@`.
 *
 * As written it counts the lines of its input that are equal, as
 * `sort | uniq -c` does: map emits each line as a key with the value 1, and
 * the built-in sum (SOREN_SUM_U32, "combine": "sum" in @NAME@.json) adds up
 * each key's values.  Make it yours: change map, and the manifest where the
 * key or value type, the combine or the order change.
 */
#include <soren/soren.h>
#include <soren/text.h>

/* Runs once for each record (here a line, without its newline), on the GPU
 * and on the CPU engine: it may not call host-only libraries or keep global
 * state, and it must emit the same pairs each time it sees a record. */
SOREN_FN void @IDENT@_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p; /* no parameters: "params" in the manifest declares them */
    const uint32_t one = 1;
    soren_emit(e, r->data, soren_key_size(r->size), &one);
}

SOREN_PLUGIN(@NAME@, SOREN_STAGE(.map = @IDENT@_map, .combine = SOREN_SUM_U32))
