"""Reading ``extern "C" solve(...)`` signatures from CUDA sources, and pointer-size expressions."""

from __future__ import annotations

import ctypes
import dataclasses
import pathlib

import pytest
import torch

from kbench_ci.cuda.signature import (
    PointerParam,
    ScalarParam,
    SolveSignature,
    evaluate_size_expression,
    parse_ptr_size_options,
    parse_solve_signature,
    read_solve_signature,
    supported_types,
)
from kbench_ci.errors import SignatureError, UsageError, UserFileError

# Expected parameters, compactly: ("in"/"out", name, dtype) for pointers, ("scalar", name, ctype)
In = lambda name, dtype: ("in", name, dtype)  # noqa: E731
Out = lambda name, dtype: ("out", name, dtype)  # noqa: E731
Sc = lambda name, ctype: ("scalar", name, ctype)  # noqa: E731

f32, f16, bf16, i32, i64 = torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64


def _shape(sig: SolveSignature) -> list[tuple[str, str, object]]:
    out: list[tuple[str, str, object]] = []
    for p in sig.params:
        if isinstance(p, PointerParam):
            out.append(("in" if p.is_const else "out", p.name, p.torch_dtype))
        else:
            out.append(("scalar", p.name, p.ctype))
    return out


CASES: dict[str, tuple[str, list[tuple[str, str, object]]]] = {
    "vector_add": (
        'extern "C" void solve(const float* A, const float* B, float* C, int N) {\n'
        "    vector_add<<<(N + 255) / 256, 256>>>(A, B, C, N);\n}\n",
        [In("A", f32), In("B", f32), Out("C", f32), Sc("N", ctypes.c_int)],
    ),
    "matmul_fp16": (
        'extern "C" void solve(const half* A, const half* B, half* C, int M, int N, int K) {}',
        [In("A", f16), In("B", f16), Out("C", f16)]
        + [Sc(n, ctypes.c_int) for n in "MNK"],
    ),
    "softmax": (
        'extern "C" void solve(const float* input, float* output, int N) { }',
        [In("input", f32), Out("output", f32), Sc("N", ctypes.c_int)],
    ),
    "reduction_size_t": (
        'extern "C" void solve(const float* input, float* output, size_t N) { }',
        [In("input", f32), Out("output", f32), Sc("N", ctypes.c_size_t)],
    ),
    "conv2d": (
        'extern "C" void solve(const float* input, const float* kernel, float* output,\n'
        "                      int input_rows, int input_cols, int kernel_rows, int kernel_cols)"
        " { }",
        [In("input", f32), In("kernel", f32), Out("output", f32)]
        + [Sc(n, ctypes.c_int) for n in ("input_rows", "input_cols", "kernel_rows", "kernel_cols")],
    ),
    "attention_with_scale": (
        'extern "C" void solve(const float* Q, const float* K, const float* V, float* output,\n'
        "                      int M, int N, int d, float scale) { }",
        [In("Q", f32), In("K", f32), In("V", f32), Out("output", f32)]
        + [Sc("M", ctypes.c_int), Sc("N", ctypes.c_int), Sc("d", ctypes.c_int)]
        + [Sc("scale", ctypes.c_float)],
    ),
    "histogram": (
        'extern "C" void solve(const int* input, int* histogram, int N, int num_bins) { }',
        [In("input", i32), Out("histogram", i32)]
        + [Sc("N", ctypes.c_int), Sc("num_bins", ctypes.c_int)],
    ),
    "sort_in_place": (
        'extern "C" void solve(float* data, int N) { }',
        [Out("data", f32), Sc("N", ctypes.c_int)],
    ),
    "top_k": (
        'extern "C" void solve(const float* input, float* values, int64_t* indices, int N, int k)'
        " { }",
        [In("input", f32), Out("values", f32), Out("indices", i64)]
        + [Sc("N", ctypes.c_int), Sc("k", ctypes.c_int)],
    ),
    "cross_entropy_multiline": (
        'extern "C"\n'
        "void solve(float *logits, const int64_t* labels, float* loss, const int B, const int V)\n"
        "{\n}\n",
        [Out("logits", f32), In("labels", i64), Out("loss", f32)]
        + [Sc("B", ctypes.c_int), Sc("V", ctypes.c_int)],
    ),
    "bf16_host_qualifier": (
        'extern "C" __host__ void solve(const __nv_bfloat16 *x, __nv_bfloat16 *y, size_t n, '
        "float eps) { }",
        [In("x", bf16), Out("y", bf16), Sc("n", ctypes.c_size_t), Sc("eps", ctypes.c_float)],
    ),
    "nv_bfloat16_alias": (
        'extern "C" void solve(const nv_bfloat16* a, nv_bfloat16* b, int n) { }',
        [In("a", bf16), Out("b", bf16), Sc("n", ctypes.c_int)],
    ),
    "__half_and_double": (
        'extern "C" void solve(const __half* x, double* out, long long n, double alpha) { }',
        [In("x", f16), Out("out", torch.float64), Sc("n", ctypes.c_longlong)]
        + [Sc("alpha", ctypes.c_double)],
    ),
    "fp8_gemm": (
        'extern "C" void solve(const __nv_fp8_e4m3* A, const __nv_fp8_e5m2* B,\n'
        "                      const float* scale,\n"
        "                      __nv_bfloat16* C, int M, int N, int K) { }",
        [In("A", torch.float8_e4m3fn), In("B", torch.float8_e5m2), In("scale", f32)]
        + [Out("C", bf16)]
        + [Sc(n, ctypes.c_int) for n in "MNK"],
    ),
    "restrict_everywhere": (
        'extern "C" void solve(const float* __restrict__ a, const float* __restrict b,\n'
        "                      float* __restrict__ c, const int n) { }",
        [In("a", f32), In("b", f32), Out("c", f32), Sc("n", ctypes.c_int)],
    ),
    "east_const": (
        'extern "C" void solve(float const* x, float const * const y, float* const z, int const n)'
        " { }",
        [In("x", f32), In("y", f32), Out("z", f32), Sc("n", ctypes.c_int)],
    ),
    "const_pointer_const": (
        'extern "C" void solve(const float* const input, float* output, unsigned int n) { }',
        [In("input", f32), Out("output", f32), Sc("n", ctypes.c_uint)],
    ),
    "comments_between_params": (
        'extern "C" void solve(\n'
        "    const float* input,   // [N, D] row-major\n"
        "    /* the result */ float* output,\n"
        "    int N, /* rows */\n"
        "    int D  // cols, with a ) and a , in the comment\n"
        ") { }",
        [In("input", f32), Out("output", f32), Sc("N", ctypes.c_int), Sc("D", ctypes.c_int)],
    ),
    "extern_c_block": (
        '#include <cuda_runtime.h>\nextern "C" {\n'
        "void solve(const float* x, float* y, int n) {\n  launch(x, y, n);\n}\n}\n",
        [In("x", f32), Out("y", f32), Sc("n", ctypes.c_int)],
    ),
    "kernel_named_solve_kernel_and_global_first": (
        "#include <cuda_runtime.h>\n"
        "__global__ void solve_kernel(const float* a, float* b, int n) { }\n"
        "__global__ void helper(const float* in, float* out) {\n"
        "    solve_kernel<<<1, 1>>>(in, out, 1);\n}\n"
        'extern "C" void solve(const float* input, float* output, int N) {\n'
        "    solve_kernel<<<(N + 255) / 256, 256>>>(input, output, N);\n"
        "    cudaDeviceSynchronize();\n}\n",
        [In("input", f32), Out("output", f32), Sc("N", ctypes.c_int)],
    ),
    "global_kernel_also_named_solve": (
        "__global__ void solve(const float* a, float* b, int n, int stride) { }\n"
        'extern "C" void solve(const float* input, float* output, int N) {\n'
        "    solve<<<1, 256>>>(input, output, N, 1);\n}\n",
        [In("input", f32), Out("output", f32), Sc("N", ctypes.c_int)],
    ),
    "declaration_then_definition": (
        'extern "C" void solve(const float*, float*, int);\n'
        "static void helper() {}\n"
        'extern "C" void solve(const float* src, float* dst, int count) { helper(); }\n',
        [In("src", f32), Out("dst", f32), Sc("count", ctypes.c_int)],
    ),
    "declaration_inherits_c_linkage": (
        'extern "C" void solve(const float* a, float* b, int n);\n'
        "void solve(const float* in, float* out, int len) { }\n",
        [In("in", f32), Out("out", f32), Sc("len", ctypes.c_int)],
    ),
    "declaration_only": (
        'extern "C" void solve(const float* in, float* out, int n);',
        [In("in", f32), Out("out", f32), Sc("n", ctypes.c_int)],
    ),
    "attribute_visibility": (
        'extern "C" __attribute__((visibility("default"))) void solve(const float* x, float* y,'
        " int n) { }",
        [In("x", f32), Out("y", f32), Sc("n", ctypes.c_int)],
    ),
    "export_macro": (
        '#define CUDA_API __attribute__((visibility("default")))\n'
        'extern "C" CUDA_API void solve(const float* x, float* y, int n) { }',
        [In("x", f32), Out("y", f32), Sc("n", ctypes.c_int)],
    ),
    "extern_c_via_macro": (
        '#define EXPORT extern "C"\nEXPORT void solve(const float* x, float* y, int n) { }',
        [In("x", f32), Out("y", f32), Sc("n", ctypes.c_int)],
    ),
    "type_macro": (
        "#define REAL float\n"
        'extern "C" void solve(const REAL* x, REAL* y, int n) { }',
        [In("x", f32), Out("y", f32), Sc("n", ctypes.c_int)],
    ),
    "ifdef_cplusplus_header_idiom": (
        '#ifdef __cplusplus\nextern "C" {\n#endif\n'
        "void solve(const float* x, float* y, int n);\n"
        "#ifdef __cplusplus\n}\n#endif\n",
        [In("x", f32), Out("y", f32), Sc("n", ctypes.c_int)],
    ),
    "if0_block_skipped": (
        "#if 0\nextern \"C\" void solve(const float* old, float* stale, int n) { }\n#endif\n"
        'extern "C" void solve(const float* x, float* y, int n) { }',
        [In("x", f32), Out("y", f32), Sc("n", ctypes.c_int)],
    ),
    "commented_out_old_version": (
        '// extern "C" void solve(const float* old, float* stale, int n) { }\n'
        '/* extern "C" void solve(double* nope) { } */\n'
        'extern "C" void solve(const float* x, float* y, int n) { }',
        [In("x", f32), Out("y", f32), Sc("n", ctypes.c_int)],
    ),
    "integer_zoo": (
        'extern "C" void solve(const int32_t* a, uint32_t* b, const int16_t* c, uint16_t* d,\n'
        "    const int8_t* e, uint8_t* f, const unsigned char* g, signed char* h, short* i,\n"
        "    unsigned long long* j, long long int* k, const uint64_t* l, bool* m,\n"
        "    std::int64_t* o, const unsigned* p) { }",
        [In("a", i32), Out("b", torch.uint32), In("c", torch.int16), Out("d", torch.uint16)]
        + [In("e", torch.int8), Out("f", torch.uint8), In("g", torch.uint8), Out("h", torch.int8)]
        + [Out("i", torch.int16), Out("j", torch.uint64), Out("k", i64), In("l", torch.uint64)]
        + [Out("m", torch.bool), Out("o", i64), In("p", torch.uint32)],
    ),
    "scalar_zoo": (
        'extern "C" void solve(float* out, unsigned n, long l, int64_t a, uint64_t b, short s,\n'
        "    int16_t t, bool flag, const double d, unsigned long long u, std::size_t z,\n"
        "    int32_t w, uint32_t x, long unsigned int lu) { }",
        [Out("out", f32), Sc("n", ctypes.c_uint), Sc("l", ctypes.c_long)]
        + [Sc("a", ctypes.c_int64), Sc("b", ctypes.c_uint64), Sc("s", ctypes.c_short)]
        + [Sc("t", ctypes.c_int16), Sc("flag", ctypes.c_bool), Sc("d", ctypes.c_double)]
        + [Sc("u", ctypes.c_ulonglong), Sc("z", ctypes.c_size_t), Sc("w", ctypes.c_int32)]
        + [Sc("x", ctypes.c_uint32), Sc("lu", ctypes.c_ulong)],
    ),
    "array_parameter_is_pointer": (
        'extern "C" void solve(const float input[], float output[], int n) { }',
        [In("input", f32), Out("output", f32), Sc("n", ctypes.c_int)],
    ),
    "pointer_star_spacing": (
        'extern "C" void solve(const float *a, float * b, float*c, int  n) { }',
        [In("a", f32), Out("b", f32), Out("c", f32), Sc("n", ctypes.c_int)],
    ),
    "calls_and_strings_in_body": (
        '#include <cstdio>\nextern "C" void solve(const float* x, float* y, int n) {\n'
        '    printf("solve(%d) { extern \\"C\\" void solve(int q) ", n);\n'
        "    char c = '{';\n"
        "    int big = 1'000'000;\n"
        "    solve(x, y, n - 1);\n}\n",
        [In("x", f32), Out("y", f32), Sc("n", ctypes.c_int)],
    ),
    "member_named_solve_ignored": (
        "struct Solver { void solve(float* wrong, int n); };\n"
        "namespace detail { inline void prepare() {} }\n"
        'extern "C" void solve(const float* x, float* y, int n) { Solver s; s.solve(y, n); }',
        [In("x", f32), Out("y", f32), Sc("n", ctypes.c_int)],
    ),
    "extern_c_inside_namespace": (
        'namespace kern {\nextern "C" void solve(const float* x, float* y, int n) { }\n}\n',
        [In("x", f32), Out("y", f32), Sc("n", ctypes.c_int)],
    ),
    "void_parameter_list": (
        'extern "C" void solve(void) { }',
        [],
    ),
    "host_main_calls_solve": (
        'extern "C" void solve(const float* input, float* output, int N) { }\n'
        "int main() { float *a, *b; solve(a, b, 16); return 0; }\n",
        [In("input", f32), Out("output", f32), Sc("N", ctypes.c_int)],
    ),
    "crlf_line_endings_and_splice": (
        '// solution\r\nextern "C" void solve(const float* x,\r\n float* y, \\\r\n int n) { }\r\n',
        [In("x", f32), Out("y", f32), Sc("n", ctypes.c_int)],
    ),
    "if1_else_branch_skipped": (
        '#if 1\nextern "C" void solve(const float* x, float* y, int n) { }\n#else\n'
        'extern "C" void solve(double* wrong) { }\n#endif\n',
        [In("x", f32), Out("y", f32), Sc("n", ctypes.c_int)],
    ),
    "raw_string_mentioning_solve": (
        'static const char* doc = R"doc(extern "C" void solve(double* q) {})doc";\n'
        'extern "C" void solve(const float* x, float* y, int n) { }',
        [In("x", f32), Out("y", f32), Sc("n", ctypes.c_int)],
    ),
    "trailing_specifiers": (
        'extern "C" cudaError_t solve(const float* x, float* y, int n) noexcept { return 0; }',
        [In("x", f32), Out("y", f32), Sc("n", ctypes.c_int)],
    ),
    "char_buffers_and_scalars": (
        'extern "C" void solve(const char* text, int* counts, unsigned char c, int8_t d) { }',
        [In("text", torch.int8), Out("counts", i32), Sc("c", ctypes.c_ubyte)]
        + [Sc("d", ctypes.c_int8)],
    ),
    "maybe_unused_and_default": (
        'extern "C" void solve(const float* x, float* y, [[maybe_unused]] int n, int pad = 0) { }',
        [In("x", f32), Out("y", f32), Sc("n", ctypes.c_int), Sc("pad", ctypes.c_int)],
    ),
}


@pytest.mark.parametrize("source, expected", list(CASES.values()), ids=list(CASES))
def test_parses_real_world_signatures(source: str, expected: list[tuple[str, str, object]]) -> None:
    sig = parse_solve_signature(source)
    assert _shape(sig) == expected


def test_properties_split_pointers_scalars_and_outputs() -> None:
    sig = parse_solve_signature(
        'extern "C" void solve(const half* A, const half* B, half* C, float* stats, int M, float s)'
        " {}"
    )
    assert [p.name for p in sig.pointers] == ["A", "B", "C", "stats"]
    assert [p.name for p in sig.outputs] == ["C", "stats"]
    assert [p.name for p in sig.scalars] == ["M", "s"]
    assert all(p.is_output for p in sig.outputs)
    assert sig.scalars[0].is_integer and not sig.scalars[1].is_integer
    assert sig.pointers[0].c_type == "half"


def test_c_type_is_normalised() -> None:
    sig = parse_solve_signature(
        'extern "C" void solve(const std::int64_t* a, long unsigned long int* b, const __half* c,'
        " unsigned n, std::size_t m) {}"
    )
    assert [p.c_type for p in sig.params] == [
        "int64_t", "unsigned long long", "__half", "unsigned int", "size_t",
    ]  # fmt: skip


def test_values_are_frozen() -> None:
    sig = parse_solve_signature('extern "C" void solve(float* y, int n) {}')
    with pytest.raises(dataclasses.FrozenInstanceError):
        sig.params[0].name = "z"  # type: ignore[misc]
    assert isinstance(sig.params, tuple)
    assert isinstance(sig.params[1], ScalarParam)


def test_first_definition_wins_over_earlier_declaration_and_later_definition() -> None:
    source = (
        'extern "C" void solve(const float* decl_in, float* decl_out, int decl_n);\n'
        'extern "C" void solve(const float* first, float* second, int third) {}\n'
    )
    assert [p.name for p in parse_solve_signature(source).params] == ["first", "second", "third"]


def test_custom_function_name() -> None:
    source = (
        'extern "C" void solve(float* a, int n) {}\n'
        'extern "C" void run(const float* x, int m) {}'
    )
    sig = parse_solve_signature(source, function_name="run")
    assert [p.name for p in sig.params] == ["x", "m"]


def test_fp8_e8m0_when_torch_has_it() -> None:
    if not hasattr(torch, "float8_e8m0fnu"):
        pytest.skip("torch without float8_e8m0fnu")
    sig = parse_solve_signature('extern "C" void solve(const __nv_fp8_e8m0* s, float* y) {}')
    assert sig.pointers[0].torch_dtype == torch.float8_e8m0fnu


def test_supported_types_table_is_consistent() -> None:
    table = supported_types()
    assert table["float"] == (torch.float32, ctypes.c_float)
    assert table["__nv_bfloat16"] == (torch.bfloat16, None)
    assert table["int64_t"] == (torch.int64, ctypes.c_int64)
    for name, (dtype, ctype) in table.items():
        assert dtype is not None or ctype is not None, name


# ---------------------------------------------------------------------------- error cases


def _error(source: str, **kwargs: str) -> SignatureError:
    with pytest.raises(SignatureError) as info:
        parse_solve_signature(source, **kwargs)
    return info.value


def test_double_pointer_is_rejected_with_name_and_type() -> None:
    err = _error('extern "C" void solve(float** batches, int n) {}', source_name="k.cu")
    assert "'batches'" in err.message and "float**" in err.message
    assert err.message.startswith("k.cu:1:")
    assert err.hint is not None and "float* batches" in err.hint


def test_reference_is_rejected() -> None:
    err = _error('extern "C" void solve(const float* x, float& total, int n) {}')
    assert "'total'" in err.message and "reference" in err.message
    assert err.hint is not None and "float* total" in err.hint


def test_unnamed_parameter() -> None:
    err = _error('extern "C" void solve(const float* x, float* y, int) {}')
    assert "parameter 3 of solve has no name; bind-by-name needs one" in err.message


def test_missing_solve_shows_expected_form() -> None:
    err = _error("__global__ void kernel(float* x) {}\nvoid run(float* x) {}", source_name="a.cu")
    assert 'no extern "C" function named solve' in err.message and "a.cu" in err.message
    assert err.hint is not None and 'extern "C" void solve(' in err.hint


def test_cpp_mangled_solve() -> None:
    err = _error('#include <cuda_runtime.h>\n\nvoid solve(const float* x, float* y, int n) {}')
    assert "C++ linkage" in err.message and "mangled" in err.message
    assert "<source>:3" in err.message
    assert err.hint is not None and 'extern "C"' in err.hint


def test_extern_cpp_block_is_mangled() -> None:
    err = _error('extern "C++" { void solve(const float* x, float* y, int n) {} }')
    assert "mangled" in err.message


def test_overload_with_other_arity_does_not_inherit_c_linkage() -> None:
    source = 'extern "C" void solve(const float* a, float* b, int n);\nvoid solve(float* a) {}\n'
    # the C-linkage declaration is still found; the one-argument overload is C++
    assert [p.name for p in parse_solve_signature(source).params] == ["a", "b", "n"]


def test_global_solve_is_not_the_entry_point() -> None:
    err = _error('extern "C" __global__ void solve(const float* x, float* y, int n) {}')
    assert "__global__ kernel" in err.message


def test_template_solve() -> None:
    err = _error("template <typename T>\nvoid solve(const T* x, T* y, int n) {}")
    assert "template" in err.message


@pytest.mark.parametrize("vector_type", ["float4", "float2", "half2", "__nv_bfloat162", "int4"])
def test_vector_types_are_unsupported(vector_type: str) -> None:
    err = _error(f'extern "C" void solve(const {vector_type}* x, float* y, int n) {{}}')
    assert "'x'" in err.message and vector_type in err.message
    assert err.hint is not None and "reinterpret_cast" in err.hint


def test_template_parameter_names_the_text() -> None:
    err = _error('extern "C" void solve(thrust::device_ptr<float> data, int n) {}')
    assert "thrust::device_ptr<float> data" in err.message and "template" in err.message


def test_function_like_macro_in_parameter_names_it() -> None:
    err = _error('#define PTR(T) T*\nextern "C" void solve(const PTR(float) x, int n) {}')
    assert "PTR()" in err.message and "const PTR(float) x" in err.message


@pytest.mark.parametrize(
    "param, needle",
    [
        ("const void* x", "void pointer"),
        ("cudaStream_t stream", "cudaStream_t"),
        ("half scale", "by value"),
        ("long double x", "long double"),
        ("struct Params* p", "struct Params*"),
        ("float x[4][4]", "multi-dimensional"),
        ("void (*cb)(int) ", "function pointer"),
        ("n", "single word"),
    ],
)
def test_other_unsupported_parameters(param: str, needle: str) -> None:
    err = _error(f'extern "C" void solve(float* y, {param}) {{}}')
    assert needle in err.message


def test_macro_that_swallows_a_parameter_name_is_explained() -> None:
    err = _error('#define N 1024\nextern "C" void solve(const float* x, float* y, int N) {}')
    assert "'N' is a #define" in err.message and "parameter 3" in err.message


def test_unclosed_parameter_list() -> None:
    assert "never closed" in _error('extern "C" void solve(float* a, int n').message


@pytest.mark.parametrize(
    "source, needle",
    [
        ('extern "C" __device__ void solve(float* a) {}', "__device__ function"),
        ('extern "C" { static void solve(float* a) {} }', "static"),
    ],
)
def test_non_exported_solves(source: str, needle: str) -> None:
    assert needle in _error(source).message


def test_variadic_and_duplicate_names() -> None:
    assert "variadic" in _error('extern "C" void solve(float* y, ...) {}').message
    assert "both named 'y'" in _error('extern "C" void solve(float* y, int y) {}').message


def test_line_numbers_point_at_the_parameter() -> None:
    source = '\n\nextern "C" void solve(\n    const float* x,\n    float** bad,\n    int n) {}'
    assert _error(source, source_name="s.cu").message.startswith("s.cu:5:")


def test_read_solve_signature(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "solution.cu"
    path.write_text('extern "C" void solve(const float* a, float* b, int n) {}\n')
    assert [p.name for p in read_solve_signature(path).params] == ["a", "b", "n"]
    path.write_text('extern "C" void solve(float** a) {}\n')
    with pytest.raises(SignatureError, match="solution.cu:1"):
        read_solve_signature(path)


def test_read_solve_signature_missing_file(tmp_path: pathlib.Path) -> None:
    with pytest.raises(UserFileError, match="does not exist") as info:
        read_solve_signature(tmp_path / "nope.cu")
    assert not isinstance(info.value, SignatureError)
    with pytest.raises(UserFileError, match="directory"):
        read_solve_signature(tmp_path)


# ---------------------------------------------------------------------------- size expressions


@pytest.mark.parametrize(
    "expression, dims, expected",
    [
        ("N", {"N": 7}, 7),
        ("M*N", {"M": 3, "N": 4}, 12),
        ("B*(V+1)", {"B": 2, "V": 9}, 20),
        ("2*N", {"N": 5}, 10),
        ("N // 2 + N % 3", {"N": 10}, 6),
        ("N / 4", {"N": 12}, 3),
        ("2**K", {"K": 10}, 1024),
        ("-(-N)", {"N": 1}, 1),
        ("  4096  ", {}, 4096),
    ],
)
def test_size_expressions(expression: str, dims: dict[str, int], expected: int) -> None:
    assert evaluate_size_expression(expression, dims) == expected


def test_size_expression_unknown_name_lists_known_dims() -> None:
    with pytest.raises(SignatureError) as info:
        evaluate_size_expression("M*X", {"N": 1, "M": 2})
    assert "'X'" in info.value.message
    assert info.value.hint == "known dims: M, N"


@pytest.mark.parametrize(
    "expression, dims, needle",
    [
        ("N - 4", {"N": 4}, "evaluates to 0"),
        ("-N", {"N": 4}, "evaluates to -4"),
        ("N / 3", {"N": 4}, "not a whole number"),
        ("N // 0", {"N": 4}, "divides by zero"),
        ("N % 0", {"N": 4}, "divides by zero"),
        ("2 ** -1", {}, "negative exponent"),
        ("10 ** 10 ** 10", {}, "too large"),
        ("N * 2**62", {"N": 4}, "too large"),
    ],
)
def test_size_expression_bad_values(expression: str, dims: dict[str, int], needle: str) -> None:
    with pytest.raises(SignatureError, match=needle):
        evaluate_size_expression(expression, dims)


@pytest.mark.parametrize(
    "expression, needle",
    [
        ("max(M, N)", "function call"),
        ("N.bit_length", "attribute access"),
        ("__import__('os').system('true')", "function call"),
        ("N * 1.5", "literal 1.5"),
        ("N if M else 1", "IfExp"),
        ("N << 2", "LShift"),
        ("N > 2", "Compare"),
        ("[N][0]", "Subscript"),
        ("True", "literal True"),
        ("N +", "not valid syntax"),
        ("", "empty"),
    ],
)
def test_size_expression_disallowed_syntax(expression: str, needle: str) -> None:
    with pytest.raises(SignatureError, match=needle):
        evaluate_size_expression(expression, {"N": 4, "M": 2})


def test_size_expression_rejects_non_integer_dims() -> None:
    with pytest.raises(SignatureError, match="not an integer"):
        evaluate_size_expression("N", {"N": 2.5})  # type: ignore[dict-item]


# ---------------------------------------------------------------------------- --ptr-size


def test_ptr_size_options() -> None:
    per, default = parse_ptr_size_options(["output=M*N", " labels = B ", "M*K"])
    assert per == {"output": "M*N", "labels": "B"}
    assert default == "M*K"
    assert parse_ptr_size_options([]) == ({}, None)


@pytest.mark.parametrize(
    "values, needle",
    [
        (["N", "M"], "two sizes"),
        (["x=N", "x=M"], "twice"),
        (["=N"], "not a parameter name"),
        (["M*N=4"], "not a parameter name"),
        (["x="], "empty"),
        ([""], "empty"),
        (["x=len(N)"], "function call"),
        (["N==3"], "Compare"),
        (["x=N+"], "not valid syntax"),
    ],
)
def test_ptr_size_options_malformed(values: list[str], needle: str) -> None:
    with pytest.raises(UsageError, match=needle) as info:
        parse_ptr_size_options(values)
    assert not isinstance(info.value, SignatureError)
