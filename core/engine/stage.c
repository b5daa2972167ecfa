#include "stage.h"

void soren_stage_spec_init(soren_stage_spec *spec, const soren_manifest *m,
                           const soren_stage *code)
{
    *spec = (soren_stage_spec){
        .job_name = m->name,
        .code = code,
        .input_format = m->input.format,
        .record_size = m->input.record_size,
        .task_count = m->input.count,
        .key_type = m->key.type,
        .key_max_size = m->key.max_size,
        .key_count = m->key.count,
        .value_type = m->value.type,
        .value_size = soren_type_size(m->value.type),
        .combine = m->combine,
        .reduce = m->reduce,
        .order = m->output.order,
        .limit = m->output.limit,
    };
}
