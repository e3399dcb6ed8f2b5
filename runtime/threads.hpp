// How many threads the CPU executor uses. By default one per hardware thread, or EINC_NUM_THREADS where it
// is set (a whole number from 1 to max_thread_count; anything else is an einc::Error the first time the
// CPU executor needs its threads). GPU work and GEMMs through OpenBLAS (whose own threads follow
// OPENBLAS_NUM_THREADS) are not affected, but for steps of several GEMMs shared between these threads,
// each on one of OpenBLAS's (docs/api.md, "Concurrency").
//
//   einc::set_thread_count(4);   // this process's CPU work on at most 4 threads, from now on
//   int n = einc::thread_count();
//
// Every call is safe from any thread at any time, also while other threads run einc calls: calls running
// finish on the threads they have. Calls from several threads at once each progress on their own thread
// and share the pool's other threads.
#pragma once

namespace einc {

// The upper bound of set_thread_count and EINC_NUM_THREADS.
inline constexpr int max_thread_count = 1024;

// Sets the number of threads the CPU executor uses, the calling thread included: 1 to max_thread_count,
// or 0 for the default (EINC_NUM_THREADS if set, else one per hardware thread). A negative or larger count
// is an einc::Error of kind usage. It may wait for threads leaving the pool to finish the chunk they run.
// The one-line calls (einc::rearrange & co.) plan anew for the new count: a change clears
// default_plan_cache(). Programs bound before keep their schedule and stay correct: a step they split
// between threads runs on at most the new count (and on at most the old one where the split was into one
// partial result per thread); a step scheduled for one thread stays on one.
void set_thread_count(int threads);

// The number of threads the CPU executor uses, the calling thread included. Throws einc::Error if
// EINC_NUM_THREADS is invalid and set_thread_count was not called yet.
int thread_count();

}  // namespace einc
