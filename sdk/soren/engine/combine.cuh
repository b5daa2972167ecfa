/*
 * combine.cuh - folding a value into an accumulator in device memory.
 *
 * Built-in combines use the native atomics where the hardware has them
 * (add on u32/u64/f32/f64, min/max on u32/u64/i64); the rest (float min/max,
 * user combines) run as compare-and-swap loops on the accumulator's 4 or 8
 * bytes, which are lock-free and cannot deadlock within a warp.  Every value
 * type is 4 or 8 bytes, so a CAS loop always covers the whole value.
 */
#ifndef SOREN_ENGINE_COMBINE_CUH
#define SOREN_ENGINE_COMBINE_CUH

#include <cuda/atomic>
#include <soren/soren.h>

namespace soren {

template <uint32_t Type> struct value_of;
template <> struct value_of<SOREN_TYPE_U32> { typedef uint32_t type; typedef unsigned int word; };
template <> struct value_of<SOREN_TYPE_U64> { typedef uint64_t type; typedef unsigned long long word; };
template <> struct value_of<SOREN_TYPE_I64> { typedef int64_t type; typedef unsigned long long word; };
template <> struct value_of<SOREN_TYPE_F32> { typedef float type; typedef unsigned int word; };
template <> struct value_of<SOREN_TYPE_F64> { typedef double type; typedef unsigned long long word; };

/* The identity of a built-in combine: what an accumulator starts as. */
template <uint32_t Op, uint32_t Type>
__device__ inline typename value_of<Type>::type identity()
{
    typedef typename value_of<Type>::type T;
    /* Each type's branch is compiled only for it: ~ does not apply to floats. */
    if constexpr (Op == SOREN_COMBINE_MIN) {
        if constexpr (Type == SOREN_TYPE_F32)
            return __int_as_float(0x7f800000);
        else if constexpr (Type == SOREN_TYPE_F64)
            return __longlong_as_double(0x7ff0000000000000ll);
        else if constexpr (Type == SOREN_TYPE_I64)
            return (T)0x7fffffffffffffffll;
        else
            return (T)~(T)0;
    } else if constexpr (Op == SOREN_COMBINE_MAX) {
        if constexpr (Type == SOREN_TYPE_F32)
            return __int_as_float((int)0xff800000);
        else if constexpr (Type == SOREN_TYPE_F64)
            return __longlong_as_double((long long)0xfff0000000000000ull);
        else if constexpr (Type == SOREN_TYPE_I64)
            return (T)(-0x7fffffffffffffffll - 1);
        else
            return (T)0;
    }
    return (T)0;
}

template <typename T, typename W> __device__ inline W bits_of(T v)
{
    W w;
    memcpy(&w, &v, sizeof w);
    return w;
}

template <typename T, typename W> __device__ inline T value_from(W w)
{
    T v;
    memcpy(&v, &w, sizeof v);
    return v;
}

/* A read of a word that other threads update with atomics and no barrier
 * between: a relaxed atomic load, so that the memory model sees no data
 * race, and a plain load in the machine code.  (An atomicOr of 0 said the
 * same at the price of an atomic: on a 64-bit word of shared memory, a
 * compare-and-swap loop.) */
template <typename W> __device__ inline W atomic_read(W *p)
{
    return cuda::atomic_ref<W, cuda::thread_scope_device>(*p).load(cuda::std::memory_order_relaxed);
}

/* acc = f(acc, v) by compare-and-swap on the accumulator's bits. */
template <typename T, typename W, typename F>
__device__ inline void cas_loop(T *acc, T v, F f)
{
    W *word = (W *)acc;
    W seen = atomic_read(word), assumed;
    do {
        assumed = seen;
        T next = f(value_from<T, W>(assumed), v);
        seen = atomicCAS(word, assumed, bits_of<T, W>(next));
    } while (seen != assumed);
}

/* Folds the value at v into the accumulator at acc. */
template <uint32_t Op, uint32_t Type, soren_combine_fn *UserFn>
__device__ inline void combine_into(void *acc, const void *v)
{
    if (Op == SOREN_COMBINE_USER) {
        /* The user's function works on whole values: run it on a private
         * copy and publish the result with CAS. */
        if (sizeof(typename value_of<Type>::type) == 4) {
            cas_loop<uint32_t, unsigned int>((uint32_t *)acc, *(const uint32_t *)v,
                                             [](uint32_t a, uint32_t b) {
                                                 UserFn(&a, &b);
                                                 return a;
                                             });
        } else {
            cas_loop<uint64_t, unsigned long long>((uint64_t *)acc, *(const uint64_t *)v,
                                                   [](uint64_t a, uint64_t b) {
                                                       UserFn(&a, &b);
                                                       return a;
                                                   });
        }
        return;
    }
    typedef typename value_of<Type>::type T;
    typedef typename value_of<Type>::word W;
    T x = *(const T *)v;
    if (Op == SOREN_COMBINE_COUNT)
        x = (T)1;
    /* Integers go through the atomics' own word types (uint64_t is not
     * unsigned long long on every platform). */
    const bool is_float = Type == SOREN_TYPE_F32 || Type == SOREN_TYPE_F64;
    if (Op == SOREN_COMBINE_SUM || Op == SOREN_COMBINE_COUNT) {
        if (Type == SOREN_TYPE_F32)
            atomicAdd((float *)acc, (float)x);
        else if (Type == SOREN_TYPE_F64)
            atomicAdd((double *)acc, (double)x);
        else
            atomicAdd((W *)acc, (W)x);
    } else if (Op == SOREN_COMBINE_MIN) {
        if (is_float)
            cas_loop<T, W>((T *)acc, x, [](T a, T b) { return b < a ? b : a; });
        else if (Type == SOREN_TYPE_I64)
            atomicMin((long long *)acc, (long long)x);
        else
            atomicMin((W *)acc, (W)x);
    } else if (Op == SOREN_COMBINE_MAX) {
        if (is_float)
            cas_loop<T, W>((T *)acc, x, [](T a, T b) { return b > a ? b : a; });
        else if (Type == SOREN_TYPE_I64)
            atomicMax((long long *)acc, (long long)x);
        else
            atomicMax((W *)acc, (W)x);
    }
}

} /* namespace soren */

#endif /* SOREN_ENGINE_COMBINE_CUH */
