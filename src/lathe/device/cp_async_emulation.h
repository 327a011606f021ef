// `cp.async` (sm_80+: 16-byte copies from global to shared memory that bypass the registers) on the
// host, under device/simt_emulation.h: the emulated forms of the kernels' cp.async wrappers
// (ops/flash_attention/flash_attention_cuda_mma.cuh). Plain C++, built on every machine.
//
// Asynchronous as on the GPU: a copy reads its source when issued but lands in shared memory only
// at the cp.async.wait_group that completes its commit group, in the issuing thread's order, so a
// tile read before its wait holds its old bytes (a wrong wait count gives wrong results here, as
// it may on the GPU). Each copy is a shared-memory write for the emulation's race check
// (simt::note_shared_write) both when issued and when it lands; copies never waited for are an
// error when the block ends. fence_proxy_async() is `fence.proxy.async.shared::cta`: the calling
// thread's landed writes become visible to the tensor cores' reads (wgmma), which the race check
// otherwise refuses.
#pragma once

namespace lathe::cp_async_emulation {

// cp.async.cg.shared.global [destination], [source], 16, bytes: `bytes` (0 or 16) of the source,
// zeros for the rest.
void copy_16(void* shared_destination, const void* global_source, int bytes);
// cp.async.commit_group: this thread's copies since the last commit become one group.
void commit();
// cp.async.wait_group: lands this thread's oldest groups until at most `pending` remain.
void wait(int pending);
// fence.proxy.async.shared::cta by the calling thread.
void fence_proxy_async();

}  // namespace lathe::cp_async_emulation
