// ClassifyExit and the terminal-error parser: one realistic output per framework message in the
// table, recovered and unrelated errors that must not count, and hostile bytes.
#include "daemon/exit_classifier.h"

#include <gtest/gtest.h>

#include "common/text.h"
#include "core/recovery.h"

namespace colo {
namespace {

using std::string_literals::operator""s;

const ProcessEnd kFailed{true, 1, true};
const ProcessEnd kAborted{false, 6, true};  // SIGABRT: an uncaught C++ exception, a glog fatal

// Every detail the classifier gives is stored and shown: valid UTF-8, at most 1,024 bytes.
void ExpectSafeDetail(const JobExit& exit) {
  EXPECT_LE(exit.detail.size(), 1024u);
  EXPECT_EQ(ValidUtf8(exit.detail), exit.detail);
}

// `output` (on stderr) ends with an out-of-memory error whose line begins with `line_start`.
void ExpectOutOfMemory(const std::string& output, const std::string& line_start,
                       const ProcessEnd& end = kFailed) {
  const JobExit exit = ClassifyExit(end, false, output, "");
  EXPECT_EQ(exit.kind, ExitKind::kOutOfMemory) << exit.detail;
  EXPECT_EQ(exit.detail.substr(0, line_start.size()), line_start);
  ExpectSafeDetail(exit);
}

void ExpectFailure(const std::string& output, const std::string& detail,
                   const std::string& stdout_output = "") {
  const JobExit exit = ClassifyExit(kFailed, false, output, stdout_output);
  EXPECT_EQ(exit.kind, ExitKind::kFailure) << exit.detail;
  EXPECT_EQ(exit.detail, detail);
  ExpectSafeDetail(exit);
}

// --- One test per entry of the table, in the order of the table ---

TEST(ExitClassifier, PyTorch25OutOfMemoryError) {
  // tqdm's bar has no newline of its own when the exception is printed: the header follows it.
  ExpectOutOfMemory(
      "Epoch 0:  12%|\xe2\x96\x88\xe2\x96\x8f        | 37/300 [00:21<02:31,  1.74it/s, "
      "loss=2.31]Traceback (most recent call last):\n"
      "  File \"/home/alice/bert/train.py\", line 142, in <module>\n"
      "    main()\n"
      "  File \"/home/alice/bert/train.py\", line 118, in main\n"
      "    loss = model(**batch).loss\n"
      "           ^^^^^^^^^^^^^^^^^^\n"
      "  File \"/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py\", line 1736, "
      "in _wrapped_call_impl\n"
      "    return self._call_impl(*args, **kwargs)\n"
      "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
      "  File \"/opt/conda/lib/python3.11/site-packages/transformers/models/bert/modeling_bert.py\""
      ", line 1071, in forward\n"
      "    attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))\n"
      "                       ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
      "capacity of 79.10 GiB of which 1.07 GiB is free. Including non-PyTorch memory, this "
      "process has 78.02 GiB memory in use. Of the allocated memory 75.61 GiB is allocated by "
      "PyTorch, and 1.89 GiB is reserved by PyTorch but unallocated. If reserved but unallocated "
      "memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
      "fragmentation.  See documentation for Memory Management  "
      "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)\n",
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0");
}

TEST(ExitClassifier, PyTorch113To24CudaOutOfMemoryError) {
  ExpectOutOfMemory(
      "Traceback (most recent call last):\n"
      "  File \"train.py\", line 88, in <module>\n"
      "    outputs = model(images)\n"
      "  File \"/usr/local/lib/python3.10/dist-packages/torch/nn/modules/module.py\", line 1501, "
      "in _call_impl\n"
      "    return forward_call(*args, **kwargs)\n"
      "  File \"/usr/local/lib/python3.10/dist-packages/torchvision/models/resnet.py\", line 285, "
      "in forward\n"
      "    return self._forward_impl(x)\n"
      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 784.00 MiB (GPU 0; "
      "39.39 GiB total capacity; 37.12 GiB already allocated; 402.81 MiB free; 37.80 GiB "
      "reserved in total by PyTorch) If reserved memory is >> allocated memory try setting "
      "max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and "
      "PYTORCH_CUDA_ALLOC_CONF\n",
      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 784.00 MiB");
}

// What PyTorch 2.11 printed for a ResNet-50 at batch 128 declared at 3 GiB, under colod's 3 GiB MPS
// limit on an H100 (its step peaks at 13.9 GiB): the figures make the crash limit-bound, and its
// retry runs under the room of its GPU rather than under the raised need, so it needs no third.
TEST(ExitClassifier, PyTorchsFiguresAtAnMpsLimitSizeARetryThatFits) {
  const JobExit exit = ClassifyExit(
      kFailed, false,
      "Traceback (most recent call last):\n"
      "  File \"/work/bench/real-trace/job.py\", line 75, in step\n"
      "    output = model(**inputs) if isinstance(inputs, dict) else model(inputs)\n"
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 196.00 MiB. GPU 0 has a total "
      "capacity of 79.18 GiB of which 139.85 MiB is free. Process 1103 has 66.00 MiB memory in "
      "use. Including non-PyTorch memory, this process has 2.87 GiB memory in use. Of the "
      "allocated memory 2.19 GiB is allocated by PyTorch, and 161.47 MiB is reserved by PyTorch "
      "but unallocated. If reserved but unallocated memory is large try setting "
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.\n",
      "");
  ASSERT_EQ(exit.kind, ExitKind::kOutOfMemory) << exit.detail;
  EXPECT_EQ(exit.oom.framework, "PyTorch");
  ASSERT_TRUE(exit.oom.requested && exit.oom.in_use);
  EXPECT_EQ(exit.oom.requested->count(), MiB(196).count());
  EXPECT_NEAR(exit.oom.in_use->count(), GiBf(2.87).count(), MiB(1).count())
      << "this process's use, not another process's 66 MiB";
  OutOfMemoryFacts facts;
  facts.planned = facts.limit = GiB(3);
  facts.hard_limit = true;
  facts.observed_peak = GiBf(1.7);
  facts.evidence = exit.oom;
  facts.capacity = GiBf(79.18);
  const RaisedNeed raised = RaiseNeedAfterOutOfMemory(facts, OutOfMemoryGrowth{});
  EXPECT_TRUE(raised.limit_bound) << raised.basis;
  EXPECT_LT(raised.need, GiBf(13.9)) << "the figures only bound the need from below";
  const Bytes room = GiB(40) - GiBf(7.2);  // 40 GiB left free, a ResNet-50 at batch 64 beside it
  EXPECT_GE(AttemptLimit(raised.need, room, raised.limit_bound), GiBf(13.9));
}

// The need colod raises for a job whose attempt printed `output`, planned and limited (under MPS)
// at `limit` (0: neither), after its samples saw `observed_peak`, on GPUs of `capacity`.
RaisedNeed RaiseAfter(const std::string& output, Bytes limit, Bytes observed_peak, Bytes capacity) {
  const JobExit exit = ClassifyExit(kFailed, false, output, "");
  EXPECT_EQ(exit.kind, ExitKind::kOutOfMemory) << exit.detail;
  EXPECT_TRUE(exit.oom.in_use && exit.oom.requested) << "PyTorch's figures were read";
  OutOfMemoryFacts facts;
  facts.planned = facts.limit = limit;
  facts.hard_limit = limit > Bytes(0);
  facts.observed_peak = observed_peak;
  facts.evidence = exit.oom;
  facts.capacity = capacity;
  return RaiseNeedAfterOutOfMemory(facts, OutOfMemoryGrowth{});
}

// The same ResNet-50 declared at 3 GiB on a 4x H200 server (PyTorch 2.11): colod's events said
// "3.0 GiB -> 8.1 GiB: PyTorch in use 2.8 GiB + tried 392 MiB at the 3.0 GiB limit" and "attempt 2
// may use the 126.0 GiB its GPU has free"; attempt 2 peaked at 13.5 GiB and succeeded. The first
// retry covers the peak, and would under 40 GiB left beside a 20.4 GiB VGG-16 too.
TEST(ExitClassifier, PyTorchsFiguresOnAnH200SizeTheFirstRetryToThePeak) {
  const RaisedNeed raised = RaiseAfter(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 392.00 MiB. GPU 0 has a total "
      "capacity of 139.80 GiB of which 223.85 MiB is free. Process 1535 has 68.00 MiB memory in "
      "use. Including non-PyTorch memory, this process has 2.78 GiB memory in use. Of the "
      "allocated memory 1.99 GiB is allocated by PyTorch, and 412.00 MiB is reserved by PyTorch "
      "but unallocated.\n",
      GiB(3), Bytes(2988441600), GiBf(139.80));
  EXPECT_TRUE(raised.limit_bound) << raised.basis;
  EXPECT_EQ(FormatBytes(raised.need), "8.1 GiB") << "as colod raised it on the GPUs";
  const Bytes peak = Bytes(14516486144);  // attempt 2's peak, MPS context included
  EXPECT_GE(AttemptLimit(raised.need, GiBf(126.0), raised.limit_bound), peak);
  EXPECT_GE(AttemptLimit(raised.need, GiB(40) - GiBf(20.4), raised.limit_bound), peak);
}

// The 2-GPU GPT-2 (batch 16) run with no memory number beside an Inception-v3 under 40 GiB left per
// H200: it crashed below any limit of its own, the GPU full. Its need, from PyTorch's figures
// (in use 14.5 GiB, colod's event; the stored message ends before them), covered attempt 2's
// 17.8 GiB peak, and attempt 2 ran under that need and succeeded. The other processes' figures
// ("Process 6775 has 99.72 GiB", a ballast) are not the job's.
TEST(ExitClassifier, PyTorchsFiguresOfAFullGpuSizeTheFirstRetryToThePeak) {
  const RaisedNeed raised = RaiseAfter(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.54 GiB. GPU 0 has a total "
      "capacity of 139.80 GiB of which 201.62 MiB is free. Process 6775 has 99.72 GiB memory in "
      "use. Process 7214 has 68.00 MiB memory in use. Process 6946 has 738.00 MiB memory in use. "
      "Process 7307 has 24.61 GiB memory in use. Including non-PyTorch memory, this process has "
      "14.50 GiB memory in use. Of the allocated memory 13.62 GiB is allocated by PyTorch, and "
      "256.00 MiB is reserved by PyTorch but unallocated.\n",
      Bytes(0), Bytes(15684599808), GiBf(139.80));
  EXPECT_FALSE(raised.limit_bound) << raised.basis;
  EXPECT_EQ(FormatBytes(raised.need), "18.1 GiB")
      << "as colod raised it on the GPUs, from in use 14.5 GiB + tried 1.5 GiB: " << raised.basis;
  EXPECT_GE(AttemptLimit(raised.need, GiB(40) - GiBf(1.3), raised.limit_bound), Bytes(19102957568))
      << "attempt 2's peak";
}

// PyTorch 1.13 to 2.0's message: "reserved in total by PyTorch" is what the process held.
TEST(ExitClassifier, OlderPyTorchsFiguresGiveWhatItHeld) {
  const JobExit exit = ClassifyExit(
      kFailed, false,
      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 784.00 MiB (GPU 0; "
      "39.39 GiB total capacity; 37.12 GiB already allocated; 402.81 MiB free; 37.80 GiB "
      "reserved in total by PyTorch) If reserved memory is >> allocated memory try setting "
      "max_split_size_mb to avoid fragmentation.\n",
      "");
  ASSERT_EQ(exit.kind, ExitKind::kOutOfMemory) << exit.detail;
  ASSERT_TRUE(exit.oom.requested && exit.oom.in_use);
  EXPECT_EQ(exit.oom.requested->count(), MiB(784).count());
  EXPECT_NEAR(exit.oom.in_use->count(), GiBf(37.80).count(), MiB(1).count());
}

TEST(ExitClassifier, OlderPyTorchRuntimeError) {
  ExpectOutOfMemory(
      "Traceback (most recent call last):\n"
      "  File \"main.py\", line 210, in <module>\n"
      "    train(epoch)\n"
      "  File \"main.py\", line 97, in train\n"
      "    loss.backward()\n"
      "  File \"/usr/lib/python3.8/site-packages/torch/_tensor.py\", line 307, in backward\n"
      "    torch.autograd.backward(self, gradient, retain_graph, create_graph, inputs=inputs)\n"
      "  File \"/usr/lib/python3.8/site-packages/torch/autograd/__init__.py\", line 154, in "
      "backward\n"
      "    Variable._execution_engine.run_backward(\n"
      "RuntimeError: CUDA out of memory. Tried to allocate 1.12 GiB (GPU 0; 15.78 GiB total "
      "capacity; 13.02 GiB already allocated; 1.01 GiB free; 13.45 GiB reserved in total by "
      "PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to "
      "avoid fragmentation.  See documentation for Memory Management and "
      "PYTORCH_CUDA_ALLOC_CONF\n",
      "RuntimeError: CUDA out of memory. Tried to allocate 1.12 GiB");
}

TEST(ExitClassifier, LibtorchUncaughtOutOfMemoryError) {
  std::string output =
      "Loading camera 0, 1/1\n"
      "terminate called after throwing an instance of 'c10::OutOfMemoryError'\n"
      "  what():  CUDA out of memory. Tried to allocate 212.00 MiB (GPU 0; 23.56 GiB total "
      "capacity; 23.02 GiB already allocated; 187.44 MiB free; 23.02 GiB reserved in total by "
      "PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to "
      "avoid fragmentation.  See documentation for Memory Management and "
      "PYTORCH_CUDA_ALLOC_CONF\n"
      "Exception raised from malloc at ../c10/cuda/CUDACachingAllocator.cpp:936 (most recent "
      "call first):\n";
  // The C++ stack libtorch appends to what() is long: the fatal block still begins above it.
  for (int frame = 0; frame < 40; ++frame) {
    output += "frame #" + std::to_string(frame) +
              ": <unknown function> + 0x2f176 (0x7f356ccdb176 in "
              "/opt/libtorch/lib/libc10_cuda.so)\n";
  }
  ExpectOutOfMemory(output, "what():  CUDA out of memory. Tried to allocate 212.00 MiB", kAborted);
}

TEST(ExitClassifier, LibtorchOutOfMemoryErrorWhoseWhatWasNotPrinted) {
  // Killed while aborting: the type of the uncaught error is all there is.
  ExpectOutOfMemory(
      "step 1200 loss 0.41\n"
      "terminate called after throwing an instance of 'c10::OutOfMemoryError'\n",
      "terminate called after throwing an instance of 'c10::OutOfMemoryError'",
      ProcessEnd{false, 9, true});
}

TEST(ExitClassifier, PyTorchMessageUnderARichTraceback) {
  // rich draws the frames in a box and prints the exception's type without its module.
  ExpectOutOfMemory(
      "\xe2\x95\xad\xe2\x94\x80\xe2\x94\x80 Traceback (most recent call last) "
      "\xe2\x94\x80\xe2\x94\x80\xe2\x95\xae\n"
      "\xe2\x94\x82 /home/alice/llm/train.py:57 in <module>                  \xe2\x94\x82\n"
      "\xe2\x94\x82   57 \xe2\x94\x82   loss = model(batch).loss                 \xe2\x94\x82\n"
      "\xe2\x95\xb0\xe2\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2\x95\xaf\n"
      "OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total "
      "capacity of 23.55 GiB of which 1.02 GiB is free.\n",
      "OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB");
}

TEST(ExitClassifier, CudaErrorOutOfMemoryAsUnderAnMpsMemoryLimit) {
  ExpectOutOfMemory(
      "Traceback (most recent call last):\n"
      "  File \"/work/train.py\", line 31, in <module>\n"
      "    x = torch.randn(8192, 8192, device=\"cuda\")\n"
      "RuntimeError: CUDA error: out of memory\n"
      "CUDA kernel errors might be asynchronously reported at some other API call, so the "
      "stacktrace below might be incorrect.\n"
      "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
      "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n\n",
      "RuntimeError: CUDA error: out of memory");
}

TEST(ExitClassifier, CublasAllocFailed) {
  ExpectOutOfMemory(
      "Traceback (most recent call last):\n"
      "  File \"finetune.py\", line 64, in <module>\n"
      "    out = model(input_ids)\n"
      "  File \"/usr/lib/python3/dist-packages/torch/nn/modules/linear.py\", line 114, in "
      "forward\n"
      "    return F.linear(input, self.weight, self.bias)\n"
      "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\n",
      "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`");
}

TEST(ExitClassifier, CudnnAllocFailed) {
  ExpectOutOfMemory(
      "Traceback (most recent call last):\n"
      "  File \"seg.py\", line 120, in <module>\n"
      "    pred = net(img)\n"
      "  File \"/usr/lib/python3/dist-packages/torch/nn/modules/conv.py\", line 456, in "
      "_conv_forward\n"
      "    return F.conv2d(input, weight, bias, self.stride,\n"
      "RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED\n",
      "RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED");
}

TEST(ExitClassifier, CudnnNotEnoughWorkspace) {
  ExpectOutOfMemory(
      "Traceback (most recent call last):\n"
      "  File \"seg.py\", line 133, in <module>\n"
      "    loss.backward()\n"
      "  File \"/usr/lib/python3/dist-packages/torch/autograd/graph.py\", line 768, in "
      "_engine_run_backward\n"
      "    return Variable._execution_engine.run_backward(  # Calls into the C++ engine\n"
      "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_ENOUGH_WORKSPACE\n",
      "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_ENOUGH_WORKSPACE");
}

TEST(ExitClassifier, TensorFlowEagerResourceExhaustedError) {
  ExpectOutOfMemory(
      "2024-05-02 14:11:03.512345: W tensorflow/core/framework/op_kernel.cc:1839] OP_REQUIRES "
      "failed at matmul_op_impl.h:781 : RESOURCE_EXHAUSTED: OOM when allocating tensor with "
      "shape[65536,65536] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by "
      "allocator GPU_0_bfc\n"
      "Traceback (most recent call last):\n"
      "  File \"/home/bob/tf/train.py\", line 12, in <module>\n"
      "    y = tf.matmul(x, x)\n"
      "  File \"/usr/local/lib/python3.10/dist-packages/tensorflow/python/util/"
      "traceback_utils.py\", line 153, in error_handler\n"
      "    raise e.with_traceback(filtered_tb) from None\n"
      "tensorflow.python.framework.errors_impl.ResourceExhaustedError: {{function_node "
      "__wrapped__MatMul_device_/job:localhost/replica:0/task:0/device:GPU:0}} OOM when "
      "allocating tensor with shape[65536,65536] and type float on "
      "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc [Op:MatMul] name: \n",
      "tensorflow.python.framework.errors_impl.ResourceExhaustedError: {{function_node");
}

TEST(ExitClassifier, TensorFlowGraphErrorNamesTheAllocationAfterTheOpsTrace) {
  std::string output =
      "Traceback (most recent call last):\n"
      "  File \"/home/bob/keras/train.py\", line 40, in <module>\n"
      "    model.fit(x_train, y_train, batch_size=4096, epochs=5)\n"
      "  File \"/usr/local/lib/python3.10/dist-packages/keras/utils/traceback_utils.py\", line "
      "70, in error_handler\n"
      "    raise e.with_traceback(filtered_tb) from None\n"
      "tensorflow.python.framework.errors_impl.ResourceExhaustedError: Graph execution error:\n"
      "\n"
      "Detected at node 'sequential/dense/MatMul' defined at (most recent call last):\n";
  for (int frame = 0; frame < 200; ++frame) {
    output +=
        "    File \"/usr/local/lib/python3.10/dist-packages/keras/engine/training.py\", line "
        "1685, in fit\n"
        "      tmp_logs = self.train_function(iterator)\n";
  }
  output +=
      "Node: 'sequential/dense/MatMul'\n"
      "OOM when allocating tensor with shape[4096,65536] and type float on "
      "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n"
      "\t [[{{node sequential/dense/MatMul}}]]\n"
      "Hint: If you want to see a list of allocated tensors when OOM happens, add "
      "report_tensor_allocations_upon_oom to RunOptions for current allocation info. This isn't "
      "available when running in Eager mode.\n"
      " [Op:__inference_train_function_1234]\n";
  ExpectOutOfMemory(output, "OOM when allocating tensor with shape[4096,65536]");
}

TEST(ExitClassifier, TensorFlowFatalNonOkStatus) {
  ExpectOutOfMemory(
      "2020-05-04 13:43:27.518051: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1241] "
      "Created TensorFlow device (/job:localhost/replica:0/task:0/device:GPU:0 with 40 MB "
      "memory) -> physical GPU (device: 0, name: GeForce GTX 1050, pci bus id: 0000:01:00.0, "
      "compute capability: 6.1)\n"
      "2020-05-04 13:43:28.011034: F ./tensorflow/core/kernels/random_op_gpu.h:232] "
      "Non-OK-status: GpuLaunchKernel(FillPhiloxRandomKernelLaunch<Distribution>, num_blocks, "
      "block_size, 0, d.stream(), gen, data, size, dist) status: Internal: out of memory\n"
      "Aborted (core dumped)\n",
      "2020-05-04 13:43:28.011034: F ./tensorflow/core/kernels/random_op_gpu.h:232] "
      "Non-OK-status: GpuLaunchKernel",
      ProcessEnd{true, 134, true});
  // TensorFlow >= 2.16 logs through absl.
  ExpectOutOfMemory(
      "I0000 00:00:1718000000.123456   81234 gpu_device.cc:2019] Created device "
      "/job:localhost/replica:0/task:0/device:GPU:0 with 512 MB memory:  -> device: 0\n"
      "F0000 00:00:1718000003.654321   81301 random_op_gpu.h:247] Non-OK-status: "
      "GpuLaunchKernel(FillPhiloxRandomKernelLaunch<Distribution>, num_blocks, block_size, 0, "
      "d.stream(), key, counter, gen, data, size, dist) status: INTERNAL: out of memory\n",
      "F0000 00:00:1718000003.654321   81301 random_op_gpu.h:247] Non-OK-status", kAborted);
}

TEST(ExitClassifier, TensorFlowFatalWithAnXlaStatus) {
  ExpectOutOfMemory(
      "F0000 00:00:1718000003.654321   81301 pjrt_stream_executor_client.cc:1312] "
      "Non-OK-status: buffer.status() status: RESOURCE_EXHAUSTED: Out of memory while trying "
      "to allocate 4294967296 bytes.\n"
      "*** Check failure stack trace: ***\n"
      "    @     0x7f2b1c5a2e39  absl::lts_20230802::log_internal::LogMessageFatal::"
      "~LogMessageFatal()\n",
      "F0000 00:00:1718000003.654321   81301 pjrt_stream_executor_client.cc:1312] Non-OK-status",
      kAborted);
}

TEST(ExitClassifier, JaxXlaRuntimeError) {
  ExpectOutOfMemory(
      "Traceback (most recent call last):\n"
      "  File \"/home/carol/jax/train.py\", line 77, in <module>\n"
      "    state, metrics = train_step(state, batch)\n"
      "                     ^^^^^^^^^^^^^^^^^^^^^^^^\n"
      "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
      "allocate 4770354232 bytes.\n"
      "BufferAssignment OOM Debugging.\n"
      "BufferAssignment stats:\n"
      "             parameter allocation:  372.76MiB\n"
      "              constant allocation:    48.5KiB\n"
      "        maybe_live_out allocation:    9.64GiB\n"
      "     preallocated temp allocation:    4.44GiB\n"
      "                 total allocation:   14.44GiB\n"
      "              total fragmentation:  680.30MiB (4.60%)\n"
      "--------------------\n"
      "For simplicity, JAX has removed its internal frames from the traceback of the following "
      "exception. Set JAX_TRACEBACK_FILTERING=off to include these.\n",
      "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying");
}

TEST(ExitClassifier, JaxRuntimeError) {
  ExpectOutOfMemory(
      "Traceback (most recent call last):\n"
      "  File \"/home/carol/jax/train.py\", line 77, in <module>\n"
      "    state, metrics = train_step(state, batch)\n"
      "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
      "17179869184 bytes.\n",
      "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory");
}

TEST(ExitClassifier, CudaRuntimeMemoryAllocation) {
  // The CUDA samples' checkCudaErrors, as many C++ programs print a failed call.
  ExpectOutOfMemory(
      "allocating 68719476736 bytes for the lattice\n"
      "CUDA error at lattice.cu:88 code=2(cudaErrorMemoryAllocation) \"cudaMalloc(&d_buf, "
      "bytes)\"\n",
      "CUDA error at lattice.cu:88 code=2(cudaErrorMemoryAllocation)");
}

TEST(ExitClassifier, CudaDriverOutOfMemory) {
  ExpectOutOfMemory(
      "Traceback (most recent call last):\n"
      "  File \"kernel.py\", line 15, in <module>\n"
      "    d_a = cuda.to_device(a)\n"
      "  File \"/usr/lib/python3/dist-packages/numba/cuda/cudadrv/driver.py\", line 395, in "
      "_check_ctypes_error\n"
      "    raise CudaAPIError(retcode, msg)\n"
      "numba.cuda.cudadrv.driver.CudaAPIError: [2] Call to cuMemAlloc results in "
      "CUDA_ERROR_OUT_OF_MEMORY\n",
      "numba.cuda.cudadrv.driver.CudaAPIError: [2] Call to cuMemAlloc results in "
      "CUDA_ERROR_OUT_OF_MEMORY");
}

TEST(ExitClassifier, NcclCudaFailure) {
  ExpectOutOfMemory(
      "Traceback (most recent call last):\n"
      "  File \"/workspace/train_ddp.py\", line 52, in <module>\n"
      "    dist.all_reduce(t)\n"
      "  File \"/usr/local/lib/python3.10/dist-packages/torch/distributed/distributed_c10d.py\", "
      "line 2195, in all_reduce\n"
      "    work = group.allreduce([tensor], opts)\n"
      "torch.distributed.DistBackendError: NCCL error in: "
      "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with "
      "NCCL_DEBUG=INFO for details), NCCL version 2.19.3\n"
      "ncclUnhandledCudaError: Call to CUDA function failed.\n"
      "Last error:\n"
      "Cuda failure 'out of memory'\n",
      "Cuda failure 'out of memory'");
}

TEST(ExitClassifier, CupyOutOfMemoryError) {
  ExpectOutOfMemory(
      "Traceback (most recent call last):\n"
      "  File \"sim.py\", line 20, in <module>\n"
      "    a = cp.empty((1 << 36,), dtype=cp.float32)\n"
      "  File \"cupy/cuda/memory.pyx\", line 1427, in cupy.cuda.memory.SingleDeviceMemoryPool."
      "_try_malloc\n"
      "cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 274,877,906,944 bytes "
      "(allocated so far: 0 bytes).\n",
      "cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 274,877,906,944 bytes");
}

TEST(ExitClassifier, TensorFlowBfcWarningCountsOnlyAsTheTerminalError) {
  const std::string warning =
      "2020-09-24 21:35:23.363348: W tensorflow/core/common_runtime/bfc_allocator.cc:246] "
      "Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.02GiB with freed_by_count=0. "
      "The caller indicates that this is not a failure, but may mean that there could be "
      "performance gains if more memory were available.\n";
  ExpectOutOfMemory("Epoch 1/10\n" + warning, warning.substr(0, 60), ProcessEnd{false, 9, true});
  // Followed by an unrelated error, with or without a traceback: that error ended it.
  ExpectFailure(warning + warning +
                    "Epoch 1/10\n"
                    "Traceback (most recent call last):\n"
                    "  File \"train.py\", line 30, in <module>\n"
                    "    ds = load(args.data)\n"
                    "FileNotFoundError: [Errno 2] No such file or directory: '/data/imagenet'\n",
                "exit code 1: FileNotFoundError: [Errno 2] No such file or directory: "
                "'/data/imagenet'");
  ExpectFailure(warning + "error: checkpoint /ckpt/step_900 is corrupt\n",
                "exit code 1: error: checkpoint /ckpt/step_900 is corrupt");
}

// --- What must not count ---

TEST(ExitClassifier, RecoveredOutOfMemoryFollowedByAnUnrelatedError) {
  ExpectFailure(
      "Traceback (most recent call last):\n"
      "  File \"train.py\", line 40, in train_step\n"
      "    loss = model(batch)\n"
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
      "skipping batch 17 after an OOM; retrying with batch size 16\n"
      "epoch 3 step 100 loss 0.21\n"
      "Traceback (most recent call last):\n"
      "  File \"train.py\", line 80, in <module>\n"
      "    main()\n"
      "  File \"train.py\", line 72, in main\n"
      "    scheduler = make_scheduler(args.lr)\n"
      "ValueError: learning rate must be positive, got -0.001\n",
      "exit code 1: ValueError: learning rate must be positive, got -0.001");
}

TEST(ExitClassifier, ATracebackTheProgramWentOnFromIsNotTheTerminalError) {
  std::string output =
      "Traceback (most recent call last):\n"
      "  File \"train.py\", line 40, in train_step\n"
      "    loss = model(batch)\n"
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n";
  for (int step = 0; step < 100; ++step) output += "step " + std::to_string(step) + " loss 0.5\n";
  output += "Segmentation fault (core dumped)\n";
  ExpectFailure(output, "exit code 1: Segmentation fault (core dumped)");
}

TEST(ExitClassifier, TensorFlowQuotaIsNotMemory) {
  ExpectFailure(
      "Traceback (most recent call last):\n"
      "  File \"worker.py\", line 51, in <module>\n"
      "    sess.run(train_op)\n"
      "tensorflow.python.framework.errors_impl.ResourceExhaustedError: 2 root error(s) found.\n"
      "  (0) RESOURCE_EXHAUSTED: Received message larger than max (2147483661 vs. 2147483647)\n"
      "  (1) RESOURCE_EXHAUSTED: Received message larger than max (2147483661 vs. 2147483647)\n"
      "0 successful operations.\n",
      "exit code 1: tensorflow.python.framework.errors_impl.ResourceExhaustedError: 2 root "
      "error(s) found.");
  ExpectFailure("RESOURCE_EXHAUSTED: too many open files\n",
                "exit code 1: RESOURCE_EXHAUSTED: too many open files");
}

TEST(ExitClassifier, ExceptionsPythonIgnoresAtShutdownAreNotTheTerminalError) {
  const std::string ignored =
      "Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f1c2d3e4f70>\n"
      "Traceback (most recent call last):\n"
      "  File \"/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py\", line 1479, in "
      "__del__\n"
      "    self._shutdown_workers()\n"
      "AttributeError: '_MultiProcessingDataLoaderIter' object has no attribute "
      "'_shutdown'\n";
  ExpectOutOfMemory(
      "Traceback (most recent call last):\n"
      "  File \"train.py\", line 9, in <module>\n"
      "    x = torch.empty(1 << 40, device='cuda')\n"
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 TiB.\n" +
          ignored,
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 TiB.");
  ExpectFailure(
      "Traceback (most recent call last):\n"
      "  File \"train.py\", line 9, in <module>\n"
      "    cfg = load(path)\n"
      "KeyError: 'optimizer'\n" +
          ignored,
      "exit code 1: KeyError: 'optimizer'");
}

// --- Chains and streams ---

TEST(ExitClassifier, ChainedFromAnOutOfMemoryError) {
  const std::string output =
      "Traceback (most recent call last):\n"
      "  File \"train.py\", line 50, in step\n"
      "    out = model(x)\n"
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB.\n"
      "\n"
      "The above exception was the direct cause of the following exception:\n"
      "\n"
      "Traceback (most recent call last):\n"
      "  File \"train.py\", line 90, in <module>\n"
      "    raise RuntimeError(\"training failed\") from oom\n"
      "RuntimeError: training failed\n";
  ExpectOutOfMemory(output, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00");
  EXPECT_EQ(TerminalError(output),
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB.\n"
            "RuntimeError: training failed");
}

TEST(ExitClassifier, DuringHandlingOfAnOutOfMemoryError) {
  ExpectOutOfMemory(
      "Traceback (most recent call last):\n"
      "  File \"train.py\", line 50, in step\n"
      "    out = model(x)\n"
      "RuntimeError: CUDA out of memory. Tried to allocate 8.00 GiB (GPU 0; 15.78 GiB total "
      "capacity)\n"
      "\n"
      "During handling of the above exception, another exception occurred:\n"
      "\n"
      "Traceback (most recent call last):\n"
      "  File \"train.py\", line 55, in step\n"
      "    save_checkpoint(model)\n"
      "OSError: [Errno 28] No space left on device\n",
      "RuntimeError: CUDA out of memory. Tried to allocate 8.00 GiB");
}

TEST(ExitClassifier, ChainsEndAtAPlainTraceback) {
  // Two separate tracebacks, not chained: only the last one ended the process.
  ExpectFailure(
      "Traceback (most recent call last):\n"
      "  File \"a.py\", line 1, in <module>\n"
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB.\n"
      "retrying\n"
      "Traceback (most recent call last):\n"
      "  File \"a.py\", line 2, in <module>\n"
      "TypeError: unsupported operand type(s) for +: 'int' and 'str'\n",
      "exit code 1: TypeError: unsupported operand type(s) for +: 'int' and 'str'");
}

TEST(ExitClassifier, OutOfMemoryInsideAnExceptionGroup) {
  ExpectOutOfMemory(
      "  + Exception Group Traceback (most recent call last):\n"
      "  |   File \"/srv/pipeline.py\", line 40, in <module>\n"
      "  |     asyncio.run(main())\n"
      "  | ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)\n"
      "  +-+---------------- 1 ----------------\n"
      "    | Traceback (most recent call last):\n"
      "    |   File \"/srv/pipeline.py\", line 22, in infer\n"
      "    |     return model(batch)\n"
      "    | torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.00 GiB.\n"
      "    +------------------------------------\n",
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.00 GiB.");
}

TEST(ExitClassifier, OutOfMemoryOnStdoutOnly) {
  const std::string traceback =
      "Traceback (most recent call last):\n"
      "  File \"train.py\", line 12, in <module>\n"
      "    y = model(x)\n"
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB.\n";
  EXPECT_EQ(ClassifyExit(kFailed, false, "", traceback).kind, ExitKind::kOutOfMemory);
  // stderr holds only progress bars and warnings: no error of its own.
  const std::string stderr_text =
      "/usr/lib/python3/dist-packages/torch/cuda/amp/grad_scaler.py:120: UserWarning: "
      "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.\n"
      "  warnings.warn(\n"
      "\r 10%|\xe2\x96\x88         | 10/100\r 45%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88"
      "\xe2\x96\x8c     | 45/100";
  const JobExit exit = ClassifyExit(kFailed, false, stderr_text, traceback);
  EXPECT_EQ(exit.kind, ExitKind::kOutOfMemory);
  EXPECT_EQ(exit.detail, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB.");
}

TEST(ExitClassifier, StderrsErrorComesBeforeStdouts) {
  // Python prints the uncaught exception on stderr; a traceback on stdout was logged and caught.
  ExpectFailure(
      "Traceback (most recent call last):\n"
      "  File \"train.py\", line 3, in <module>\n"
      "ValueError: bad config\n",
      "exit code 1: ValueError: bad config",
      "Traceback (most recent call last):\n"
      "  File \"train.py\", line 2, in <module>\n"
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.\n");
  // Neither is an error: stderr's last line names the failure.
  ExpectFailure("step 10\n", "exit code 1: step 10", "loss 0.1\n");
  ExpectFailure("", "exit code 1: loss 0.1", "loss 0.1\n");
}

// What torchrun (PyTorch >= 2.3) prints when one of its workers fails: the worker's traceback,
// each line tagged with its rank, then torchrun's own report of the failure.
std::string TorchrunOutput(const std::string& worker_error) {
  return "[rank1]: Traceback (most recent call last):\n"
         "[rank1]:   File \"/w/train.py\", line 50, in <module>\n"
         "[rank1]:     main()\n"
         "[rank1]:   File \"/w/train.py\", line 41, in main\n"
         "[rank1]:     loss = ddp_model(batch).sum()\n"
         "[rank1]: " +
         worker_error +
         "\n"
         "W0612 10:00:00.123000 140 torch/distributed/elastic/multiprocessing/api.py:890] Sending "
         "process 1235 closing signal SIGTERM\n"
         "E0612 10:00:01.456000 140 torch/distributed/elastic/multiprocessing/api.py:862] failed "
         "(exitcode: 1) local_rank: 1 (pid: 1236) of binary: /usr/bin/python3\n"
         "Traceback (most recent call last):\n"
         "  File \"/usr/local/bin/torchrun\", line 8, in <module>\n"
         "    sys.exit(main())\n"
         "  File \"/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py\", "
         "line "
         "269, in launch_agent\n"
         "    raise ChildFailedError(\n"
         "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
         "============================================================\n"
         "/w/train.py FAILED\n"
         "------------------------------------------------------------\n"
         "Failures:\n"
         "  <NO_OTHER_FAILURES>\n"
         "------------------------------------------------------------\n"
         "Root Cause (first observed failure):\n"
         "[0]:\n"
         "  time      : 2024-06-12_10:00:00\n"
         "  host      : gpu-node-3\n"
         "  rank      : 1 (local_rank: 1)\n"
         "  exitcode  : 1 (pid: 1236)\n"
         "  error_file: <N/A>\n"
         "  traceback : To enable traceback see: "
         "https://pytorch.org/docs/stable/elastic/errors.html\n"
         "============================================================\n";
}

TEST(ExitClassifier, ALaunchersReportOfAFailedWorkerLooksAtTheWorkersError) {
  ExpectOutOfMemory(TorchrunOutput("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                                   "132.00 MiB. GPU 1 has a total capacity of 79.10 GiB"),
                    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 132.00 MiB.");
  ExpectFailure(TorchrunOutput("KeyError: 'labels'"), "exit code 1: KeyError: 'labels'");
  // accelerate on one GPU runs the script as a subprocess and raises CalledProcessError.
  ExpectOutOfMemory(
      "Traceback (most recent call last):\n"
      "  File \"/w/train.py\", line 30, in <module>\n"
      "    accelerator.backward(loss)\n"
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB.\n"
      "Traceback (most recent call last):\n"
      "  File \"/usr/local/bin/accelerate\", line 8, in <module>\n"
      "    sys.exit(main())\n"
      "  File \"/usr/local/lib/python3.10/dist-packages/accelerate/commands/launch.py\", line "
      "1168, in launch_command\n"
      "    simple_launcher(args)\n"
      "subprocess.CalledProcessError: Command '['/usr/bin/python3', 'train.py']' returned "
      "non-zero exit status 1.\n",
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB.");
  // Without a worker's error just before it, the report itself is the error.
  ExpectFailure(
      "Traceback (most recent call last):\n"
      "  File \"/usr/local/bin/torchrun\", line 8, in <module>\n"
      "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
      "/w/train.py FAILED\n",
      "exit code 1: torch.distributed.elastic.multiprocessing.errors.ChildFailedError:");
}

// --- ClassifyExit's other outcomes ---

TEST(ExitClassifier, OtherFailuresAreNeverOutOfMemory) {
  ExpectFailure("ValueError: bad learning rate\n", "exit code 1: ValueError: bad learning rate");
  const JobExit killed = ClassifyExit(ProcessEnd{false, 9, true}, false, "", "");
  EXPECT_EQ(killed.kind, ExitKind::kFailure);
  EXPECT_EQ(killed.detail, "killed by signal 9 (Killed)");
  // A C++ exception: named by its what().
  const JobExit aborted =
      ClassifyExit(kAborted, false,
                   "terminate called after throwing an instance of 'std::runtime_error'\n"
                   "  what():  dataset shard 7 is missing\n",
                   "");
  EXPECT_EQ(aborted.kind, ExitKind::kFailure);
  EXPECT_EQ(aborted.detail, "killed by signal 6 (Aborted): what():  dataset shard 7 is missing");
}

TEST(ExitClassifier, SuccessCancelAndUnknownEnds) {
  // A job that printed an OOM error but still exited 0 succeeded.
  EXPECT_EQ(
      ClassifyExit(ProcessEnd{true, 0, true}, false, "RuntimeError: CUDA out of memory.", "").kind,
      ExitKind::kSuccess);
  // colo stopped it: cancelled, whatever it printed on the way out.
  const JobExit cancelled = ClassifyExit(ProcessEnd{false, 15, true}, true,
                                         "torch.OutOfMemoryError: CUDA out of memory.", "");
  EXPECT_EQ(cancelled.kind, ExitKind::kCancelled);
  EXPECT_EQ(cancelled.detail, "cancelled: killed by signal 15 (Terminated)");
  const JobExit lost = ClassifyExit(ProcessEnd{false, 0, false}, false, "", "");
  EXPECT_EQ(lost.kind, ExitKind::kLost);
  EXPECT_EQ(lost.detail, "ended while colod was down; no exit status was recorded");
}

// --- Hostile bytes ---

TEST(ExitClassifier, InvalidUtf8AndACutProgressBarGiveAValidDetail) {
  // The last redraw of a progress bar, cut inside a three-byte block character.
  const JobExit cut = ClassifyExit(
      kFailed, false, "\r 44%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\r 45%|\xe2\x96", "");
  EXPECT_EQ(cut.kind, ExitKind::kFailure);
  EXPECT_EQ(cut.detail, "exit code 1: 45%|" + ValidUtf8("\xe2\x96"));
  ExpectSafeDetail(cut);
  const JobExit invalid = ClassifyExit(
      kFailed, false, "Error: \xff\xfe\xc0\xaf bad \xed\xa0\x80 bytes\x00 here\n"s, "");
  ExpectSafeDetail(invalid);
  EXPECT_EQ(invalid.detail.substr(0, 20), "exit code 1: Error: ");
  // An OOM line with invalid bytes in it.
  const JobExit oom = ClassifyExit(
      kFailed, false, "torch.OutOfMemoryError: CUDA out of memory \xff\x00\x80 x\n"s, "");
  EXPECT_EQ(oom.kind, ExitKind::kOutOfMemory);
  ExpectSafeDetail(oom);
}

TEST(ExitClassifier, DetailIsCutOnACodePointBoundary) {
  std::string line = "ValueError: ";
  for (int i = 0; i < 600; ++i) line += "\xc3\xa9";  // é, two bytes each
  const JobExit exit = ClassifyExit(kFailed, false, line + "\n", "");
  EXPECT_EQ(exit.kind, ExitKind::kFailure);
  EXPECT_EQ(exit.detail.size(), 1023u);  // 1,024 would split an é
  ExpectSafeDetail(exit);
  std::string oom_line = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ";
  for (int i = 0; i < 400; ++i) oom_line += "\xe2\x82\xac";  // €, three bytes each
  const JobExit oom = ClassifyExit(kFailed, false, oom_line, "");
  EXPECT_EQ(oom.kind, ExitKind::kOutOfMemory);
  ExpectSafeDetail(oom);
}

TEST(ExitClassifier, HugeInputsOfEveryShape) {
  const size_t size = 256 * 1024;
  const JobExit newlines = ClassifyExit(kFailed, false, std::string(size, '\n'), "");
  EXPECT_EQ(newlines.kind, ExitKind::kFailure);
  EXPECT_EQ(newlines.detail, "exit code 1");
  EXPECT_EQ(TerminalError(std::string(size, '\n')), "");
  std::string one_char_lines;
  while (one_char_lines.size() < size) one_char_lines += "x\n";
  EXPECT_EQ(ClassifyExit(kFailed, false, one_char_lines, one_char_lines).detail, "exit code 1: x");
  std::string headers;
  while (headers.size() < size) headers += "Traceback (most recent call last):\n";
  ExpectSafeDetail(ClassifyExit(kFailed, false, headers, headers));
  std::string separators;
  while (separators.size() < size) {
    separators +=
        "Traceback (most recent call last):\n  f\nE: e\n\nThe above exception was the direct "
        "cause of the following exception:\n\n";
  }
  separators += "Traceback (most recent call last):\n  f\nE: last\n";
  const JobExit chain = ClassifyExit(kFailed, false, separators, "");
  EXPECT_EQ(chain.detail, "exit code 1: E: last");
  EXPECT_LE(TerminalError(separators).size(), 9 * 16 * 1024u);
  const std::string line(4 * size, 'a');
  const JobExit long_line = ClassifyExit(kFailed, false, line, line);
  EXPECT_EQ(long_line.detail, "exit code 1: " + std::string(1024 - 13, 'a'));
  EXPECT_LE(TerminalError(line).size(), 16 * 1024 + 16u);
  const std::string carriage_returns(size, '\r');
  EXPECT_EQ(ClassifyExit(kFailed, false, carriage_returns, "").detail, "exit code 1");
  // Replacing invalid bytes triples them; the bound holds after that.
  EXPECT_LE(TerminalError(std::string(size, '\xff')).size(), 16 * 1024 + 16u);
  const std::string nuls(size, '\0');
  ExpectSafeDetail(ClassifyExit(kFailed, false, nuls, nuls));
}

TEST(ExitClassifier, TerminalErrorOfOutputsWithoutATraceback) {
  EXPECT_EQ(TerminalError(""), "");
  EXPECT_EQ(TerminalError("a\nb\nc\nd\n"), "b\nc\nd");
  // The last lines stop at a warning...
  EXPECT_EQ(TerminalError("W0501 10:00:00.000000 1 x.cc:1] slow\nfailed: x\n"), "failed: x");
  // ...but a fatal block runs from its first line to the end.
  EXPECT_EQ(TerminalError("ok\nterminate called after throwing an instance of 'E'\n  what():  "
                          "w\nframe #0\nframe #1\nAborted\n"),
            "terminate called after throwing an instance of 'E'\n  what():  w\nframe #0\nframe "
            "#1\nAborted");
}

TEST(ExitClassifier, FindOutOfMemoryLineLooksOnlyAtWhatItIsGiven) {
  EXPECT_EQ(FindOutOfMemoryLine("a\n  CUBLAS_STATUS_ALLOC_FAILED here  \nb"),
            "CUBLAS_STATUS_ALLOC_FAILED here");
  EXPECT_EQ(FindOutOfMemoryLine("RESOURCE_EXHAUSTED: quota"), "");
  EXPECT_EQ(FindOutOfMemoryLine("Non-OK-status: x status: INTERNAL: unknown"), "");
  EXPECT_EQ(FindOutOfMemoryLine(""), "");
}

// --- The figures of out-of-memory messages ---

TEST(ExitClassifier, PyTorchsFiguresReachTheExit) {
  const std::string message =
      "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
      "    loss.backward()\n"
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total "
      "capacity of 79.19 GiB of which 6.44 MiB is free. Process 4242 has 70.00 GiB memory in "
      "use. Including non-PyTorch memory, this process has 2.87 GiB memory in use. Of the "
      "allocated memory 2.41 GiB is allocated by PyTorch, and 33.59 MiB is reserved by PyTorch "
      "but unallocated. If reserved but unallocated memory is large try setting "
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
      "documentation for Memory Management  "
      "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)\n";
  const JobExit exit = ClassifyExit(kFailed, false, message, "");
  ASSERT_EQ(exit.kind, ExitKind::kOutOfMemory);
  ExpectSafeDetail(exit);
  // The whole line is the detail, so that a user sees every figure PyTorch gave.
  EXPECT_EQ(exit.detail.find("torch.OutOfMemoryError: CUDA out of memory. Tried"), 0u);
  EXPECT_NE(exit.detail.find("this process has 2.87 GiB memory in use"), std::string::npos);
  EXPECT_NE(exit.detail.find("(https://pytorch.org/docs/stable/notes/cuda.html"),
            std::string::npos);
  EXPECT_EQ(exit.oom.framework, "PyTorch");
  EXPECT_EQ(exit.oom.requested, MiB(20));
  // This process's figure, not another process's.
  EXPECT_EQ(exit.oom.in_use, GiBf(2.87));
}

TEST(ExitClassifier, OlderPyTorchReportsWhatItReserved) {
  const OutOfMemoryEvidence e = ParseOutOfMemoryFigures(
      "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.19 GiB total "
      "capacity; 2.41 GiB already allocated; 6.44 MiB free; 2.45 GiB reserved in total by "
      "PyTorch)");
  EXPECT_EQ(e.requested, GiB(2));
  EXPECT_EQ(e.in_use, GiBf(2.45));
}

TEST(ExitClassifier, XlaAndTensorFlowGiveTheAllocationThatFailed) {
  OutOfMemoryEvidence e = ParseOutOfMemoryFigures(
      "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
      "allocate 123456 bytes.");
  EXPECT_EQ(e.framework, "XLA");
  EXPECT_EQ(e.requested, Bytes(123456));
  EXPECT_FALSE(e.in_use);
  e = ParseOutOfMemoryFigures(
      "W tensorflow/tsl/framework/bfc_allocator.cc:479] Allocator (GPU_0_bfc) ran out of memory "
      "trying to allocate 1.00GiB (rounded to 1073741824)requested by op MatMul");
  EXPECT_EQ(e.framework, "TensorFlow");
  EXPECT_EQ(e.requested, GiB(1));
  // TensorFlow's terminal error names a shape; the allocator's line is in the same error.
  const JobExit exit = ClassifyExit(
      kFailed, false,
      "Traceback (most recent call last):\n  File \"t.py\", line 1\n"
      "tensorflow.python.framework.errors_impl.ResourceExhaustedError: Out of memory while "
      "trying to allocate 4096 KiB\n [[{{node MatMul}}]]\nOOM when allocating tensor with "
      "shape[1024,1024] and type float\n",
      "");
  ASSERT_EQ(exit.kind, ExitKind::kOutOfMemory);
  EXPECT_EQ(exit.oom.requested, MiB(4));
}

TEST(ExitClassifier, UnitsAndMalformedFigures) {
  const auto tried = [](const std::string& size) {
    return ParseOutOfMemoryFigures("CUDA out of memory. Tried to allocate " + size).requested;
  };
  EXPECT_EQ(tried("512 B"), Bytes(512));
  EXPECT_EQ(tried("1.5 KiB"), Bytes(1536));
  EXPECT_EQ(tried("3 MB"), MiB(3));
  EXPECT_EQ(tried("2 GB."), GiB(2));
  EXPECT_EQ(tried("1 TiB"), GiB(1024));
  EXPECT_EQ(tried("0.000000000001 GiB"), Bytes(0));
  EXPECT_FALSE(tried(""));
  EXPECT_FALSE(tried("MiB"));
  EXPECT_FALSE(tried("-3 MiB"));
  EXPECT_FALSE(tried("3 parsecs"));
  EXPECT_FALSE(tried("3 Bananas"));
  EXPECT_FALSE(tried("2000 TiB")) << "above 1 PiB: no GPU has it";
  EXPECT_FALSE(tried("99999999999999999999999 B")) << "too many digits";
  EXPECT_FALSE(tried(std::string(100000, '9') + " GiB"));
  EXPECT_EQ(tried("1." + std::string(10000, '0') + "1 GiB"), GiB(1));
  // A later figure counts when the first one is not one.
  EXPECT_EQ(ParseOutOfMemoryFigures("Tried to allocate lots. Tried to allocate 8 MiB").requested,
            MiB(8));
  EXPECT_FALSE(ParseOutOfMemoryFigures("no figures at all").requested);
}

TEST(ExitClassifier, HugeAndHostileOutOfMemoryMessages) {
  std::string repeated;
  while (repeated.size() < 1024 * 1024) repeated += "Tried to allocate 1";
  EXPECT_FALSE(ParseOutOfMemoryFigures(repeated).requested);
  std::string late = std::string(128 * 1024, 'x') + "Tried to allocate 1 GiB";
  EXPECT_FALSE(ParseOutOfMemoryFigures(late).requested) << "only the first 64 KiB are read";
  const std::string junk =
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate \xff\xfe"
      "\x00 this process has 9\x00 GiB memory in use"s;
  const JobExit exit = ClassifyExit(kFailed, false, junk, "");
  EXPECT_EQ(exit.kind, ExitKind::kOutOfMemory);
  EXPECT_FALSE(exit.oom.requested);
  ExpectSafeDetail(exit);
}

}  // namespace
}  // namespace colo
