import ctypes, subprocess, sys, time, os
nv = ctypes.CDLL("libnvidia-ml.so.1")
print("init", nv.nvmlInit_v2())
h = ctypes.c_void_p()
print("handle", nv.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h)))
class S(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("ts", ctypes.c_ulonglong), ("sm", ctypes.c_uint), ("mem", ctypes.c_uint), ("enc", ctypes.c_uint), ("dec", ctypes.c_uint)]
print("has ProcessesUtilizationInfo", hasattr(nv, "nvmlDeviceGetProcessesUtilizationInfo"))
HEAVY = """
import time, torch
x = torch.randn(4096, 4096, device='cuda'); torch.cuda.synchronize()
time.sleep(1.5)
t=time.time(); n=0
while time.time()-t < 3:
    x = (x @ x) / 4096; n+=1
torch.cuda.synchronize(); print('heavy done', t, time.time(), n, flush=True)
time.sleep(2)
"""
LIGHT = """
import time, torch
x = torch.randn(2048, 2048, device='cuda'); torch.cuda.synchronize()
t=time.time()
while time.time()-t < 6:
    y = x @ x; torch.cuda.synchronize(); time.sleep(0.05)
print('light done', flush=True)
"""
BURST = """
import time, torch
x = torch.randn(4096, 4096, device='cuda'); torch.cuda.synchronize()
time.sleep(3)
t=time.time()
for _ in range(20): x = (x @ x)/4096
torch.cuda.synchronize(); print('burst', t, time.time(), flush=True)
time.sleep(3)
"""
t0 = time.time()
procs = [subprocess.Popen([sys.executable, "-c", s]) for s in (HEAVY, LIGHT, BURST)]
print("pids heavy light burst", [p.pid for p in procs], "t0", t0)
last = 0
buf = (S * 256)()
totals = {}
end = time.time() + 9
while time.time() < end:
    n = ctypes.c_uint(256)
    rc = nv.nvmlDeviceGetProcessUtilization(h, buf, ctypes.byref(n), ctypes.c_ulonglong(last))
    now = time.time()
    if rc == 0:
        for i in range(n.value):
            s = buf[i]
            print(f"poll {now-t0:7.3f} pid {s.pid} ts {s.ts/1e6 - t0:7.3f} sm {s.sm} mem {s.mem}")
            last = max(last, s.ts)
    else:
        print(f"poll {now-t0:7.3f} rc {rc} n {n.value}")
    time.sleep(0.25)
for p in procs: p.wait()
# a second pass with lastSeen=0 at the end: what does the driver keep?
n = ctypes.c_uint(256)
rc = nv.nvmlDeviceGetProcessUtilization(h, buf, ctypes.byref(n), ctypes.c_ulonglong(0))
print("final rc", rc, n.value, [(buf[i].pid, buf[i].ts/1e6 - t0, buf[i].sm) for i in range(n.value)] if rc == 0 else "")
