/* llama.h: model quantization (the work is in src/quantize/). */
#include "core/log.h"
#include "llama.h"
#include "quantize/quantize.h"

uint32_t llama_model_quantize(const char *fname_inp, const char *fname_out, const llama_model_quantize_params *params) {
    if (!fname_inp || !fname_out || !params) {
        error_set("llama_model_quantize: %s is NULL", !fname_inp ? "fname_inp" : !fname_out ? "fname_out" : "params");
        return 1;
    }
    return quantize_model_file(fname_inp, fname_out, params) ? 0 : 1;
}
