// The CUDA implementations of the router losses and the bias update (moe_losses_cuda.cu),
// registered by moe_losses.cc in builds with the CUDA backend: the kernels of
// moe_losses_cuda_body.h (which the "cuda_emulated" implementations run on the host). The losses
// reduce in a fixed order (one block; the partials added in thread order, in double), so reruns
// give the same bits. Up to 1024 experts.
#pragma once

#include "lathe/ops/moe_losses/moe_losses.h"

namespace lathe {

Impl<MoeLoadBalancingLossArgs, MoeLossesCpuConfig> moe_load_balancing_loss_cuda_impl();
Impl<MoeLoadBalancingLossBackwardArgs, MoeLossesCpuConfig> moe_load_balancing_loss_backward_cuda_impl();
Impl<MoeZLossArgs, MoeLossesCpuConfig> moe_z_loss_cuda_impl();
Impl<MoeZLossBackwardArgs, MoeLossesCpuConfig> moe_z_loss_backward_cuda_impl();
Impl<MoeBiasUpdateArgs, MoeLossesCpuConfig> moe_bias_update_cuda_impl();

}  // namespace lathe
