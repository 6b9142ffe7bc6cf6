#include "daemon/exit_classifier.h"

#include <gtest/gtest.h>

namespace colo {
namespace {

const ProcessEnd kFailed{true, 1, true};

TEST(ExitClassifier, RecognisesEachFrameworksOutOfMemoryError) {
  const char* messages[] = {
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
      "torch.cuda.OutOfMemoryError: CUDA out of memory.",
      "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB",
      "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
      "allocate 17179869184 bytes.",
      "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
      "tensor with shape[8192,8192]",
      "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
      "cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
      "terminate called after throwing: cudaErrorMemoryAllocation: out of memory",
  };
  for (const char* m : messages) {
    const std::string stderr_text =
        std::string("Traceback (most recent call last):\n  ...\n") + m + "\n";
    const JobExit exit = ClassifyExit(kFailed, false, stderr_text);
    EXPECT_EQ(exit.kind, ExitKind::kOutOfMemory) << m;
    EXPECT_EQ(exit.detail, m);
  }
}

TEST(ExitClassifier, OtherFailuresAreNeverOutOfMemory) {
  const JobExit plain = ClassifyExit(kFailed, false, "ValueError: bad learning rate\n");
  EXPECT_EQ(plain.kind, ExitKind::kFailure);
  EXPECT_NE(plain.detail.find("exit code 1"), std::string::npos);
  EXPECT_NE(plain.detail.find("ValueError: bad learning rate"), std::string::npos);
  // TensorFlow's RESOURCE_EXHAUSTED also reports quotas that have nothing to do with memory.
  EXPECT_EQ(ClassifyExit(kFailed, false, "RESOURCE_EXHAUSTED: too many open files\n").kind,
            ExitKind::kFailure);
  const JobExit killed = ClassifyExit(ProcessEnd{false, 9, true}, false, "");
  EXPECT_EQ(killed.kind, ExitKind::kFailure);
  EXPECT_NE(killed.detail.find("signal 9"), std::string::npos);
}

TEST(ExitClassifier, SuccessCancelAndUnknownEnds) {
  // A job that printed an OOM warning but still exited 0 succeeded.
  EXPECT_EQ(ClassifyExit(ProcessEnd{true, 0, true}, false, "CUDA out of memory, retrying").kind,
            ExitKind::kSuccess);
  // colo stopped it: cancelled, whatever it printed on the way out.
  EXPECT_EQ(ClassifyExit(ProcessEnd{false, 15, true}, true, "CUDA out of memory").kind,
            ExitKind::kCancelled);
  EXPECT_EQ(ClassifyExit(ProcessEnd{false, 0, false}, false, "").kind, ExitKind::kLost);
}

}  // namespace
}  // namespace colo
