#include "stage.h"

_Static_assert(SOREN_MAX_PARAMS <= 32, "scratch_params has a bit for each parameter");

void soren_stage_spec_init(soren_stage_spec *spec, const soren_manifest *m,
                           const soren_stage *code)
{
    soren_stage_spec_init_at(spec, m, code, 0);
}

void soren_stage_spec_init_at(soren_stage_spec *spec, const soren_manifest *m,
                              const soren_stage *code, size_t index)
{
    soren_manifest_stage st = soren_manifest_stage_at(m, index);
    int last = index + 1 == soren_manifest_stages(m);
    *spec = (soren_stage_spec){
        .job_name = m->name,
        .code = code,
        .input_format = index == 0 ? m->input.format : SOREN_INPUT_PAIRS,
        .record_size = index == 0 ? m->input.record_size : 0,
        .task_count = index == 0 ? m->input.count : 0,
        .key_type = st.key.type,
        .key_max_size = st.key.max_size,
        .key_count = st.key.count,
        .value_type = st.value.type,
        .value_size = soren_type_size(st.value.type),
        .combine = st.combine,
        .reduce = st.reduce,
        .order = last ? m->output.order : SOREN_ORDER_KEY,
        .limit = last ? m->output.limit : 0,
    };
    for (size_t i = 0; i < m->param_count; i++)
        if (m->params[i].type == SOREN_PARAM_SCRATCH)
            spec->scratch_params |= 1u << i;
}
