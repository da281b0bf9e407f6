"""kcoral mcp's compile errors (python/kcoral/mcp_tools/worker_side.py): the compiler's lines are
mapped back to the caller's source, for gcc's and nvcc's formats, and the log names the file the
caller knows (kernel.cpp / kernel.cu), never the build cache's path."""

import pytest

pytest.importorskip("numpy")

from kcoral.mcp_tools.worker_side import diagnostics  # noqa: E402

SOURCE = "__global__ void add_one(float* x) {\n  int i = threadIdx.x;\n  x[i] += one;\n}\n"
HEADER = "#include <a>\n#include <b>\n#include <c>\n\n"  # what build_inline writes above it


def written(tmp_path, name: str):  # as build_inline writes it: main.cpp, or cuda.cu
    path = tmp_path / "cache" / "kcoral_mcp_add_one_1234" / name
    path.parent.mkdir(parents=True)
    path.write_text(HEADER + SOURCE)
    return str(path)


def test_gcc_lines_and_gutter_are_the_sources(tmp_path):
    path = written(tmp_path, "main.cpp")
    log = (
        f"[1/2] c++ -c {path} -o cpp_0.o\nFAILED: cpp_0.o\nc++ -c {path} -o cpp_0.o\n"
        f"{path}: In function 'void add_one(float*)':\n{path}:7:11: error: 'one' was not declared in this scope\n"
        "    7 |   x[i] += one;\n      |           ^~~\nninja: build stopped: subcommand failed.\n"
    )
    found = diagnostics(log, SOURCE, "kernel.cpp")
    assert found["diagnostics"] == [
        {
            "file": "kernel.cpp",
            "line": 3,
            "column": 11,
            "severity": "error",
            "message": "'one' was not declared in this scope",
            "source_line": "  x[i] += one;",
        }
    ]
    assert "kernel.cpp:3:11: error" in found["log"] and "    3 |   x[i] += one;" in found["log"]
    assert path not in found["log"] and "ninja" not in found["log"] and "FAILED" not in found["log"]


def test_nvcc_lines_are_the_sources(tmp_path):
    path = written(tmp_path, "cuda.cu")
    log = f'{path}(7): error: identifier "one" is undefined\n\n1 error detected in the compilation of "{path}".\n'
    found = diagnostics(log, SOURCE, "kernel.cu")
    assert [(d["line"], d["column"], d["message"]) for d in found["diagnostics"]] == [
        (3, None, 'identifier "one" is undefined')
    ]
    assert 'kernel.cu(3): error: identifier "one" is undefined' in found["log"] and path not in found["log"]


def test_blank_lines_before_the_source_count_as_the_caller_counts_them(tmp_path):
    path = written(tmp_path, "main.cpp")  # build_inline wrote SOURCE; the caller sent it after two blank lines
    found = diagnostics(f"{path}:7:11: error: 'one' was not declared\n", "\n\n" + SOURCE, "kernel.cpp")
    assert (found["diagnostics"][0]["line"], found["diagnostics"][0]["source_line"]) == (5, "  x[i] += one;")


def test_a_log_without_a_file_it_can_read_keeps_the_compilers_lines():
    found = diagnostics("/gone/main.cpp:2:1: error: x\n", SOURCE, "kernel.cpp")
    assert found["diagnostics"][0]["line"] == 2 and found["log"] == "kernel.cpp:2:1: error: x"


def test_errors_in_a_header_keep_its_lines_and_name_it(tmp_path):
    path = written(tmp_path, "cuda.cu")
    header = "/opt/site-packages/tvm_ffi/include/tvm/ffi/function_details.h"
    log = (
        f'{header}(582): error: class "TypeTraits<float *>" has no member "TypeStr"\n'
        f'          detected during instantiation of "Arg2Str" at line 7 of {path}\n'
        f'{path}(7): error: identifier "one" is undefined\n'
    )
    found = diagnostics(log, SOURCE, "kernel.cu")
    assert [(d["file"], d["line"], d["source_line"]) for d in found["diagnostics"]] == [
        ("kernel.cu", 3, "  x[i] += one;"),
        ("tvm/ffi/function_details.h", 582, None),
    ]
    assert "tvm/ffi/function_details.h(582): error" in found["log"] and "at line 3 of kernel.cu" in found["log"]
    assert "/opt/" not in found["log"] and path not in found["log"]
