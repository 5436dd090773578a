/* register.c - installs every table of primitives that the files of
 * prims/ecl/ export, one table per concern (as ECL's own src/c/ keeps
 * array.d and hash.d apart) and per package that calls it.  A new concern
 * adds its table here. */
#include "prims/ecl/glue.h"
#include "prims/ecl/qmatrix.h"
#include "prims/ecl/register.h"

/* A file's tables, one per package whose code calls them (the package is
 * in the table). */
extern const rl_prim_table rl_number_prims, rl_number_text_prims, rl_number_option_prims,
    rl_array_prims, rl_array_job_prims, rl_format_prims, rl_qmatrix_row_prims,
    rl_gguf_read_prims, rl_gguf_write_prims, rl_safetensors_prims, rl_json_prims, rl_vec_prims,
    rl_bench_prims, rl_clock_prims, rl_file_prims, rl_file_set_prims, rl_file_command_prims,
    rl_kernel_prims, rl_model_prims, rl_convert_prims, rl_net_prims, rl_thread_prims,
    rl_tokenizer_prims, rl_tokenizer_command_prims, rl_qtypes_prims, rl_http_prims,
    rl_bench_rows_prims;

static const rl_prim_table *const rl_tables[] = {
    &rl_glue_prims,
    &rl_number_prims,     &rl_number_text_prims, &rl_number_option_prims,
    &rl_array_prims,      &rl_array_job_prims,
    &rl_format_prims,
    &rl_qmatrix_prims,    &rl_qmatrix_row_prims,
    &rl_gguf_read_prims,  &rl_gguf_write_prims,
    &rl_safetensors_prims, &rl_json_prims,
    &rl_vec_prims,
    &rl_bench_prims,      &rl_clock_prims,
    &rl_file_prims,       &rl_file_set_prims,    &rl_file_command_prims,
    &rl_kernel_prims,     &rl_model_prims,
    &rl_convert_prims,    &rl_net_prims,         &rl_thread_prims,
    &rl_tokenizer_prims,  &rl_tokenizer_command_prims,
    &rl_qtypes_prims,     &rl_http_prims,
    &rl_bench_rows_prims,
};

void rl_register_primitives(void) {
    rl_glue_init();
    rl_qm_init();
    for (size_t i = 0; i < sizeof rl_tables / sizeof rl_tables[0]; i++)
        rl_glue_define(rl_tables[i]);
}
