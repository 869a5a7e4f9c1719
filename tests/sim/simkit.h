/* simkit.h - what both deterministic simulators (movesim, repsim) run on:
 * the seeded random source and the event queue.
 *
 * simkit_rnd is splitmix64 over a caller-held state: one seed gives one
 * sequence, on every machine. The queue orders entries by (at, seq) - time,
 * then the order of scheduling - so equal times keep their scheduling order
 * and a run repeats event for event. It holds opaque pointers; the caller
 * owns what they point to.
 *
 * Pure (no I/O, no globals); out of memory aborts (the simulators are tests).
 */
#ifndef KEEL_TESTS_SIMKIT_H
#define KEEL_TESTS_SIMKIT_H

#include <stddef.h>
#include <stdint.h>

uint64_t simkit_rnd(uint64_t *state);
/* Uniform enough in [lo, hi] (modulo bias is immaterial here). */
uint64_t simkit_rnd_in(uint64_t *state, uint64_t lo, uint64_t hi);
/* 1 with probability per_mille / 1000. */
int simkit_chance(uint64_t *state, unsigned per_mille);

typedef struct simkit_slot {
    uint64_t at, seq;
    void *p;
} simkit_slot;

typedef struct simkit_queue {
    simkit_slot *v;
    size_t n, cap;
} simkit_queue;

void simkit_push(simkit_queue *q, uint64_t at, uint64_t seq, void *p);
/* The entry with the least (at, seq), or NULL when empty. */
void *simkit_pop(simkit_queue *q);
void simkit_queue_free(simkit_queue *q);

#endif
