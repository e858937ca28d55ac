"""What torch's profiler events carry for a kernel on this machine: metadata_json() of one CUDA
kernel event, and the args of the same kernel in the saved chrome trace (issue 23's launch shapes)."""

import torch

from kbench_ci.measure.cupti import ActivityTrace

x = torch.randn(1 << 20, device="cuda")
torch.cuda.synchronize()
with ActivityTrace() as trace:
    (x * 2).sum()
    torch.cuda.synchronize()
result = trace._result
events = [e for e in result.events() if "CUDA" in str(e.device_type()) and not e.name().startswith(("Memcpy", "Memset"))]
print("torch", torch.__version__, "kernel events", len(events))
if events:
    print("metadata_json:", repr(events[0].metadata_json())[:600] if hasattr(events[0], "metadata_json") else "(absent)")
# (ActivityTrace has saved the chrome trace already when the events lacked the shapes: a second
# save raises "Trace is already saved"; the shapes below come from it)
print("shapes now:", [(e.name[:30], e.shape) for e in trace.events if e.on_gpu])
