#include "backend/device.h"

#include <math.h>

#include "backend/cpu/cpu_backend.h"
#include "core/log.h"

int backend_device_count(void) {
    return 1;
}

static bool device_check(int device) {
    if (device < 0 || device >= backend_device_count()) {
        error_set("device %d does not exist (%d device%s: the CPU)", device, backend_device_count(),
                  backend_device_count() == 1 ? "" : "s");
        return false;
    }
    return true;
}

const char *backend_device_name(int device) {
    return device_check(device) ? "CPU" : NULL;
}

struct backend_buffer_type *backend_device_buffer_type(int device) {
    return device_check(device) ? backend_cpu_buffer_type() : NULL;
}

int backend_layer_split_device(const float *tensor_split, int n_devices, int il, int n_slots) {
    if (n_devices < 1 || n_slots < 1 || il < 0 || il >= n_slots) {
        error_set("layer %d of %d over %d devices: out of range", il, n_slots, n_devices);
        return -1;
    }
    /* float arithmetic, as b1892 */
    float total = 0.0f;
    for (int d = 0; tensor_split && d < n_devices; d++) {
        if (!isfinite(tensor_split[d]) || tensor_split[d] < 0.0f) {
            error_set("tensor_split[%d] = %g: shares must be finite and not negative", d, (double)tensor_split[d]);
            return -1;
        }
        total += tensor_split[d];
    }
    bool equal = total == 0.0f;
    if (equal) total = (float)n_devices;
    /* the first device whose cumulative share exceeds il / n_slots (b1892's upper_bound) */
    float at = (float)il / (float)n_slots;
    float cum = 0.0f;
    for (int d = 0; d < n_devices; d++) {
        cum += equal ? 1.0f : tensor_split[d];
        if (cum / total > at) return d;
    }
    return n_devices - 1;
}

bool backend_layer_buffer_types(enum llama_split_mode mode, int main_device, const float *tensor_split, int il,
                                int n_slots, struct backend_buffer_type **matrix_buft,
                                struct backend_buffer_type **other_buft) {
    int device;
    switch (mode) {
    case LLAMA_SPLIT_NONE:
        if (!device_check(main_device)) return false;
        device = main_device;
        break;
    case LLAMA_SPLIT_LAYER:
        device = backend_layer_split_device(tensor_split, backend_device_count(), il, n_slots);
        if (device < 0) return false;
        break;
    case LLAMA_SPLIT_ROW:
        if (!device_check(main_device)) return false;
        if (backend_device_count() > 1) {
            error_set("LLAMA_SPLIT_ROW over %d devices needs a row-split buffer type, which this build lacks",
                      backend_device_count());
            return false;
        }
        device = main_device; /* rows split over one device: whole matrices there */
        break;
    default:
        error_set("unknown split mode %d", (int)mode);
        return false;
    }
    *matrix_buft = *other_buft = backend_device_buffer_type(device);
    return true;
}
