// Hopper's warpgroup matrix multiply (`wgmma.mma_async`) on the host, under
// device/simt_emulation.h: the emulated forms of device/wgmma.cuh's instructions, which kernels
// compiled by a host compiler call (every lane of a warpgroup, as on the GPU). Plain C++, built on
// every machine.
//
// The instructions are asynchronous on the GPU, and so they are here: a product is computed when
// issued (from the shared-memory tiles and A registers as they are then, and the accumulator as
// the warpgroup's earlier products in flight leave it), but reaches the lanes' accumulators only
// when a wait completes its group; until then the accumulators hold a NaN marker. What that
// catches, as errors or as wrong results:
//   - an accumulator read before the wait that completes its product (the marker propagates);
//   - an accumulator written in between (the marker is gone when the product lands: an error);
//   - a shared-memory operand or an A register changed before the wait (compared at the wait: an
//     error), such as a tile refilled while a product still reads it;
//   - a product never waited for (an error when the block ends), lanes of one warpgroup issuing
//     different shared operands, a descriptor lathe does not build (not 128-byte swizzled).
// Shared operands are read through their descriptors as device/wgmma_layout.h's k_major_address
// and mn_major_address say the tensor cores read them; A and accumulator fragments in registers
// follow device/wgmma.cuh's layout. Products are exact in f32 (bf16 x bf16), summed over k in
// order (the GPU's tensor cores may round and order differently).
#pragma once

#include <cstdint>

namespace lathe::wgmma::emulation {

// One instruction by the calling lane: d (this lane's n / 2 accumulator floats, in
// float[n / 8][4] order) = a b^T (+ d when accumulate) over one depth step of 16, for n = 64 or
// 128; a = the lane's A fragment (4 bf16-pair words) or null with a_descriptor (K-major) for A from
// shared memory; b_descriptor K-major, or MN-major when mn_major_b (the instruction's imm-trans-b).
void issue(int n, bool mn_major_b, float* d, const uint32_t* a, uint64_t a_descriptor, uint64_t b_descriptor,
           bool accumulate);
// wgmma.commit_group: the products issued since the last commit become one group.
void commit();
// wgmma.wait_group: completes the oldest committed groups until at most `pending` remain.
void wait(int pending);

}  // namespace lathe::wgmma::emulation
