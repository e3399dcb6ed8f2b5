/* What the host emulation records of a traced launch (einc_emulation.hpp), one event per access, batch
 * mark, barrier or shuffle of each thread, in program order; read by tests/emulation_model_test.cpp as
 * compiler/kernel_behaviour.hpp's LaneEvent (the kinds in the same order). Plain C: the emulation library
 * and the test share it. */
#ifndef EINC_TRACE_H
#define EINC_TRACE_H

enum einc_emu_event_kind {
    einc_emu_load,          /* global */
    einc_emu_store,         /* global */
    einc_emu_shared_load,   /* address: the offset in the block's shared memory */
    einc_emu_shared_store,
    einc_emu_batch_mark,    /* size: the loop's unroll */
    einc_emu_barrier,
    einc_emu_shuffle
};

struct einc_emu_event {
    unsigned kind;  /* an einc_emu_event_kind */
    unsigned site;  /* the macro's __COUNTER__: which access of the kernel's text */
    unsigned size;
    unsigned long long address;
};

/* Receives each traced thread's events after its block has run. */
typedef void (*einc_emu_sink)(void* context, unsigned block, unsigned thread, const struct einc_emu_event* events,
                              unsigned long long count);

#endif
