// The settings that make deep-learning frameworks share a GPU safely, derived from a job's plan:
// colod adds them to every job's environment (and offers them to every step of a Slurm job),
// except where the job sets the variable itself.
//   JAX      by default preallocates 75% of the GPU at start, whatever it needs: with a known
//            plan, XLA_PYTHON_CLIENT_MEM_FRACTION makes its preallocated pool the plan (less
//            the CUDA context, which comes on top); without one, XLA_PYTHON_CLIENT_PREALLOCATE=
//            false makes it allocate as it goes, so that colod sees what it uses.
//   TensorFlow  likewise maps nearly all of the GPU at start: TF_FORCE_GPU_ALLOW_GROWTH=true.
//   PyTorch  allocates as it goes already; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True only
//            when the plan was made for expandable segments (their peak differs).
// A job that has a GPU to itself (exclusive) gets none of them: it shares with nobody.
#pragma once

#include <string>
#include <vector>

#include "common/units.h"

namespace colo {

struct FrameworkPlan {
  bool sharing = true;  // false: the job has its GPUs to itself
  Bytes planned;        // per GPU: the job's MPS limit, else its plan; 0: unknown
  Bytes capacity;       // of the smallest of its GPUs
  Bytes cuda_context;   // a process's CUDA context on that GPU (calibrated); 0: unknown
  bool expandable_segments = false;  // the plan was made with PyTorch's expandable segments
};

struct FrameworkEnv {
  std::vector<std::string> set;   // NAME=value that colod adds
  std::vector<std::string> kept;  // names the job sets itself: its values stay
};

// `job_env`: the job's own environment, NAME=value.
FrameworkEnv DeriveFrameworkEnv(const FrameworkPlan& plan, const std::vector<std::string>& job_env);

}  // namespace colo
