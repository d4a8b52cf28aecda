/*
 * Helpers shared by the machine-limit probes in bench/ (a header, because
 * each .c file in bench/ is its own program).
 *
 * probe_team_run() starts n threads, pins thread i to the i-th CPU this
 * process may run on, lines them up on a barrier and times the span from
 * the common start to the moment the last thread finishes, so thread
 * creation is not part of the measurement.
 */
#ifndef LLAMAC_BENCH_PROBE_UTIL_H
#define LLAMAC_BENCH_PROBE_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef void (*probe_work_fn)(void *arg, int thread_index, int n_threads);

struct probe_thread {
    probe_work_fn fn;
    void *arg;
    int index, n_threads, cpu;
    pthread_barrier_t *barrier;
};

static inline double probe_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The i-th CPU in this process's affinity mask (cycling), or -1 if unknown. */
static inline int probe_cpu_for_thread(int i) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    int n = CPU_COUNT(&set);
    if (n <= 0) return -1;
    int want = i % n, seen = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &set)) continue;
        if (seen++ == want) return cpu;
    }
    return -1;
}

static inline void *probe_thread_main(void *p) {
    struct probe_thread *t = p;
    if (t->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(t->cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);  /* best effort */
    }
    pthread_barrier_wait(t->barrier);
    t->fn(t->arg, t->index, t->n_threads);
    pthread_barrier_wait(t->barrier);
    return NULL;
}

/* Runs fn on n_threads pinned threads at once and returns the wall time in
 * seconds of the parallel part. A probe that cannot start its threads has
 * nothing to measure: it says so and exits. */
static inline double probe_team_run(int n_threads, probe_work_fn fn, void *arg) {
    pthread_t *ids = calloc((size_t)n_threads, sizeof *ids);
    struct probe_thread *ts = calloc((size_t)n_threads, sizeof *ts);
    pthread_barrier_t barrier;
    if (!ids || !ts || pthread_barrier_init(&barrier, NULL, (unsigned)n_threads + 1) != 0) {
        fprintf(stderr, "probe: out of memory for %d threads\n", n_threads);
        exit(1);
    }
    for (int i = 0; i < n_threads; i++) {
        ts[i] = (struct probe_thread){ fn, arg, i, n_threads, probe_cpu_for_thread(i), &barrier };
        if (pthread_create(&ids[i], NULL, probe_thread_main, &ts[i]) != 0) {
            /* The barrier would never open for a partial team. */
            fprintf(stderr, "probe: could not start %d threads\n", n_threads);
            exit(1);
        }
    }
    pthread_barrier_wait(&barrier);
    double t0 = probe_now_s();
    pthread_barrier_wait(&barrier);
    double elapsed = probe_now_s() - t0;
    for (int i = 0; i < n_threads; i++) pthread_join(ids[i], NULL);
    pthread_barrier_destroy(&barrier);
    free(ids);
    free(ts);
    return elapsed;
}

/* Parses a positive integer option value; exits with a message on junk. */
static inline long long probe_parse_count(const char *prog, const char *opt, const char *s, long long max) {
    char *end = NULL;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || v < 1 || v > max) {
        fprintf(stderr, "%s: %s needs a whole number between 1 and %lld\n", prog, opt, max);
        exit(2);
    }
    return v;
}

#endif
