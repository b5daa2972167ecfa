/*
 * jschema.h - a JSON Schema (draft 2020-12) validator for the tests, small
 * enough to trust: it knows exactly the keywords Soren's report schemas use
 * (share/explain.schema.json), and refuses a schema that uses any other, so
 * a keyword it does not check can never pass a document by being ignored.
 *
 *   annotations (not checked): $schema, title, description
 *   definitions: $defs (an object of schemas), $ref ("#/$defs/NAME" only,
 *               checked in place of the keyword)
 *   any value:  type (a name or a list of names), enum
 *   numbers:    minimum, maximum
 *   objects:    required, properties, additionalProperties (a boolean or a
 *               schema)
 *   arrays:     items (one schema for every element)
 *
 * Types follow JSON Schema, with one strictness: "integer" is a JSON integer
 * as jansson reads it (1, not 1.0).
 */
#ifndef SOREN_TEST_JSCHEMA_H
#define SOREN_TEST_JSCHEMA_H

#include <jansson.h>
#include <stddef.h>

/* 1 if doc satisfies schema; else 0, with why (why_size bytes) naming the
 * JSON path and the rule broken, e.g. "$.metrics.pairs: expected integer,
 * got string".  A schema keyword it does not know is also 0, naming it. */
int js_validate(const json_t *schema, const json_t *doc, char *why, size_t why_size);

#endif /* SOREN_TEST_JSCHEMA_H */
