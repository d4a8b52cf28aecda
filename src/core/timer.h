#ifndef LLAMAC_CORE_TIMER_H
#define LLAMAC_CORE_TIMER_H

#include <stdint.h>

/* Monotonic clock in microseconds. */
int64_t time_us(void);

#endif
