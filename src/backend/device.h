/*
 * Devices, and where a model's weights go under a split mode.
 *
 * A device is a place that holds memory and computes: this build has one,
 * the CPU (device 0). The split modes of llama_model_params spread weights
 * over devices: LLAMA_SPLIT_NONE puts everything on main_gpu, LLAMA_SPLIT_LAYER
 * gives each device a range of layers in proportion to tensor_split, and
 * LLAMA_SPLIT_ROW splits each weight matrix's rows across devices. With a
 * single device all three put every weight in that device's memory; a
 * row-split buffer type arrives with the first backend that has several
 * devices.
 */
#ifndef LLAMAC_BACKEND_DEVICE_H
#define LLAMAC_BACKEND_DEVICE_H

#include <stdbool.h>

#include "backend/backend.h"
#include "llama.h"

int backend_device_count(void);
/* NULL (error_set) for a device index out of range. */
const char *backend_device_name(int device);
struct backend_buffer_type *backend_device_buffer_type(int device);

/* LLAMA_SPLIT_LAYER's rule (as b1892): slot il of n_slots (the repeating
 * layers, then the output layer as slot n_layer, so n_slots = n_layer + 1)
 * goes to the first device whose cumulative share of tensor_split exceeds
 * il / n_slots. tensor_split has n_devices entries; NULL or all zero means
 * equal shares (b1892 weighs by free device memory there, which the CPU does
 * not report). -1 (error_set) if a share is negative or not finite, or il is
 * outside [0, n_slots). */
int backend_layer_split_device(const float *tensor_split, int n_devices, int il, int n_slots);

/* The buffer types for the weights of layer slot il (see above) under a
 * split mode: *matrix_buft for the 2-D weight matrices (the ones ROW mode
 * splits), *other_buft for the rest (norms, biases) and the layer's KV
 * cache. False (error_set) if main_device is not a device, tensor_split is
 * invalid, or ROW mode is asked for over several devices (no row-split
 * buffer type yet). */
bool backend_layer_buffer_types(enum llama_split_mode mode, int main_device, const float *tensor_split, int il,
                                int n_slots, struct backend_buffer_type **matrix_buft,
                                struct backend_buffer_type **other_buft);

#endif
