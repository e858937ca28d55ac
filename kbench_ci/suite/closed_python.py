"""Whether a kernel's Python is *closed*: only the imports it states reach other files.

``compare --changed-only`` follows a Python solution's and a ref.py's imports to the repository
modules they load (suite/affected.py). That is the whole story only where nothing else in them
can load code or read a file by a name the code computes or carries as data: a pickle's
``GLOBAL`` opcode, a marshalled code object, ``__import__`` found through ``print.__self__``,
``operator.attrgetter("__self__.__import__")``, ``ctypes.pythonapi`` ... A deny-list of such
loaders is never complete, so this is an allow-list: a file is closed only if every name it uses
from outside is known not to load code or read files by a computed name.

What a file uses from outside, and what each must be:

* a name an import binds (``torch``, ``tl``, ``loads`` of ``from pickle import loads``), with the
  attributes spelled after it: the dotted name it means (``torch.randn``, ``pickle.loads``)
  must start with an entry of :data:`ALLOWED`, which names functions, classes and constants,
  never a module (so nothing past an entry can be another module's namespace). A name bound by
  an import of a repository module is followed into that module (``helpers.torch.load`` is
  ``torch.load``); one the module defines itself is repository code, checked in its own file;
* a builtin: one of :data:`SAFE_BUILTINS` (``getattr`` and its kin only with a constant
  attribute name), whether or not the file rebinds the name;
* any other name the file never binds (``__file__``, ``__builtins__``, a star import's): none is
  safe but ``__name__`` and ``__doc__``;
* an attribute of a value: not a dunder outside :data:`SAFE_DUNDERS` (``__self__``,
  ``__globals__``, ``__subclasses__`` lead to the interpreter's loaders), nor one of
  :data:`VALUE_LOADERS` (``Path(...).read_text()``).

Not covered: a value that an allowed call returns and that is itself a module or a loader
(none of :data:`ALLOWED` returns one that we know of), and code a C extension runs.
"""

from __future__ import annotations

import ast
import builtins
import importlib.machinery
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["ALLOWED", "SAFE_BUILTINS", "SAFE_DUNDERS", "VALUE_LOADERS", "OpenReach"]

#: builtins that neither load code nor read a file by a name: every exception class, and these
SAFE_BUILTINS: Final = frozenset({
    "abs", "aiter", "all", "anext", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr",
    "classmethod", "complex", "dict", "dir", "divmod", "enumerate", "filter", "float", "format", "frozenset", "hash",
    "hex", "id", "input", "int", "isinstance", "issubclass", "iter", "len", "list", "map", "max", "memoryview", "min",
    "next", "object", "oct", "ord", "pow", "print", "property", "range", "repr", "reversed", "round", "set", "slice",
    "sorted", "staticmethod", "str", "sum", "super", "tuple", "type", "zip", "__debug__", "Ellipsis", "NotImplemented",
    "True", "False", "None",
    *(name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)),
})
#: builtins that read or write one attribute: safe when the attribute's name is a constant
_ATTRIBUTE_BUILTINS = frozenset({"getattr", "hasattr", "setattr", "delattr"})
#: module globals a file may read without binding them
_SAFE_MODULE_NAMES = frozenset({"__name__", "__doc__"})
#: dunder attributes of a value that lead nowhere else (the others reach the interpreter's
#: loaders: ``__self__`` of a builtin function is the builtins module, ``__globals__`` a module's)
SAFE_DUNDERS: Final = frozenset({
    "__init__", "__name__", "__qualname__", "__doc__", "__version__", "__call__", "__len__", "__iter__", "__next__",
    "__enter__", "__exit__", "__getitem__", "__setitem__", "__contains__", "__eq__", "__hash__", "__repr__", "__str__",
    "__post_init__", "__cuda_array_interface__", "__dlpack__", "__dlpack_device__",
})
#: methods that read a file or list a folder by the name of the object they are called on
VALUE_LOADERS: Final = frozenset({
    "read_text", "read_bytes", "open", "iterdir", "glob", "rglob", "walk", "load_module", "exec_module",
    "import_module", "find_spec", "load_library", "load_source", "run_path", "run_module",
})

_TORCH: Final = (
    # tensors and their types
    "Tensor", "Size", "dtype", "device", "Generator", "finfo", "iinfo", "float32", "float", "float16", "half",
    "bfloat16", "float64", "double", "int8", "int16", "short", "int32", "int", "int64", "long", "uint8", "uint16",
    "uint32", "uint64", "bool", "complex64", "complex128", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
    "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2", "strided", "channels_last", "contiguous_format",
    "tensor", "as_tensor", "as_strided", "from_numpy", "empty", "empty_like", "empty_strided", "zeros", "zeros_like",
    "ones", "ones_like", "full", "full_like", "rand", "rand_like", "randn", "randn_like", "randint", "randint_like",
    "randperm", "arange", "linspace", "logspace", "eye", "manual_seed", "seed", "initial_seed", "is_tensor",
    "is_floating_point", "is_complex", "numel", "result_type", "promote_types", "can_cast", "get_default_dtype",
    "set_default_dtype", "get_default_device", "set_default_device", "no_grad", "enable_grad", "inference_mode",
    "set_grad_enabled", "autocast", "compile", "set_float32_matmul_precision", "get_float32_matmul_precision",
    "use_deterministic_algorithms", "are_deterministic_algorithms_enabled", "Stream", "Event",
    # arithmetic, reductions, shapes
    "abs", "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "floor_divide", "remainder",
    "fmod", "neg", "negative", "reciprocal", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt",
    "pow", "square", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "sigmoid", "erf",
    "erfc", "erfinv", "relu", "clamp", "clip", "clamp_min", "clamp_max", "minimum", "maximum", "fmin", "fmax", "min",
    "max", "amin", "amax", "aminmax", "argmin", "argmax", "sum", "nansum", "mean", "nanmean", "std", "var",
    "std_mean", "var_mean", "prod", "cumsum", "cumprod", "cummax", "cummin", "logsumexp", "logcumsumexp", "softmax",
    "log_softmax", "norm", "dist", "matmul", "mm", "bmm", "baddbmm", "addmm", "addmv", "addbmm", "mv", "dot", "vdot",
    "inner", "outer", "einsum", "tensordot", "kron", "trace", "t", "transpose", "swapaxes", "permute", "reshape",
    "flatten", "unflatten", "squeeze", "unsqueeze", "cat", "concat", "concatenate", "stack", "hstack", "vstack",
    "dstack", "split", "tensor_split", "chunk", "unbind", "narrow", "select", "gather", "scatter", "scatter_add",
    "scatter_reduce", "index_select", "index_add", "index_copy", "index_fill", "index_put", "masked_fill",
    "masked_select", "masked_scatter", "take", "take_along_dim", "where", "nonzero", "count_nonzero", "topk", "kthvalue",
    "sort", "argsort", "msort", "unique", "unique_consecutive", "flip", "fliplr", "flipud", "roll", "rot90", "tril",
    "triu", "diag", "diag_embed", "diagonal", "broadcast_to", "broadcast_tensors", "broadcast_shapes", "repeat_interleave",
    "tile", "meshgrid", "cross", "cdist", "bucketize", "searchsorted", "histc", "bincount", "allclose", "isclose",
    "equal", "eq", "ne", "lt", "le", "gt", "ge", "greater", "less", "isnan", "isinf", "isfinite", "isneginf", "isposinf",
    "nan_to_num", "sign", "signbit", "floor", "ceil", "round", "trunc", "frac", "lerp", "addcmul", "addcdiv", "all",
    "any", "logical_and", "logical_or", "logical_not", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_not", "bitwise_left_shift", "bitwise_right_shift", "real", "imag", "conj", "polar", "complex", "angle",
    "view_as_real", "view_as_complex", "hypot", "clone", "detach", "diff", "heaviside", "rad2deg", "deg2rad",
    "linalg.*",
    # torch.nn.functional, torch.fft, torch.special and torch.nn.init hold modules among their
    # names (torch.nn.functional.importlib): named one by one
    *(f"nn.functional.{name}" for name in (
        "relu", "relu6", "gelu", "silu", "mish", "elu", "selu", "celu", "leaky_relu", "prelu", "hardswish",
        "hardsigmoid", "hardtanh", "softplus", "softsign", "sigmoid", "tanh", "logsigmoid", "glu", "softmax",
        "log_softmax", "softmin", "normalize", "layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm",
        "linear", "bilinear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "unfold", "fold",
        "avg_pool1d", "avg_pool2d", "max_pool1d", "max_pool2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
        "adaptive_max_pool2d", "pad", "interpolate", "embedding", "one_hot", "dropout", "scaled_dot_product_attention",
        "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "binary_cross_entropy",
        "binary_cross_entropy_with_logits", "kl_div", "cosine_similarity", "pairwise_distance", "pixel_shuffle",
        "grid_sample", "affine_grid")),
    *(f"fft.{name}" for name in (
        "fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfft",
        "ihfft", "fftshift", "ifftshift", "fftfreq", "rfftfreq")),
    *(f"special.{name}" for name in (
        "erf", "erfc", "erfinv", "expit", "logit", "logsumexp", "softmax", "log_softmax", "gammaln", "digamma", "i0",
        "xlogy", "log1p", "expm1", "exp2", "ndtr", "ndtri", "sinc", "round", "entr")),
    *(f"nn.init.{name}" for name in (
        "normal_", "uniform_", "zeros_", "ones_", "constant_", "eye_", "xavier_uniform_", "xavier_normal_",
        "kaiming_uniform_", "kaiming_normal_", "trunc_normal_", "orthogonal_")),
    "nn.Module", "nn.Parameter", "nn.Buffer", "nn.Linear", "nn.Conv1d", "nn.Conv2d", "nn.Conv3d", "nn.LayerNorm",
    "nn.RMSNorm", "nn.GroupNorm", "nn.BatchNorm1d", "nn.BatchNorm2d", "nn.Embedding", "nn.ReLU", "nn.GELU", "nn.SiLU",
    "nn.Sigmoid", "nn.Tanh", "nn.Softmax", "nn.Dropout", "nn.Identity", "nn.Sequential", "nn.ModuleList",
    "nn.ModuleDict", "nn.MultiheadAttention",
    "autograd.Function", "autograd.grad", "testing.assert_close", "testing.make_tensor",
    "cuda.is_available", "cuda.current_stream", "cuda.default_stream", "cuda.synchronize", "cuda.current_device",
    "cuda.device_count", "cuda.set_device", "cuda.device", "cuda.get_device_name", "cuda.get_device_capability",
    "cuda.get_device_properties", "cuda.Stream", "cuda.Event", "cuda.stream", "cuda.empty_cache",
    "cuda.manual_seed", "cuda.manual_seed_all", "cuda.max_memory_allocated", "cuda.memory_allocated",
    "cuda.reset_peak_memory_stats", "cuda.is_bf16_supported", "cuda.CUDAGraph", "cuda.graph", "cuda._sleep",
    "backends.cuda.matmul.allow_tf32", "backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
    "backends.cuda.matmul.allow_bf16_reduced_precision_reduction", "backends.cudnn.allow_tf32",
    "backends.cudnn.benchmark", "backends.cudnn.deterministic", "backends.cudnn.enabled",
)
_TRITON: Final = (
    "jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2", "constexpr_function", "set_allocator",
    "JITFunction", "TritonError", "CompilationError", "OutOfResources", "testing.do_bench",
)
#: triton.language's names that are not modules (its submodules core, math, extra ... are left out)
_TRITON_LANGUAGE: Final = (
    "PropagateNan", "TRITON_MAX_TENSOR_NUMEL", "abs", "add", "advance", "arange", "argmax", "argmin",
    "associative_scan", "assume", "atomic_add", "atomic_and", "atomic_cas", "atomic_max", "atomic_min", "atomic_or",
    "atomic_xchg", "atomic_xor", "bfloat16", "broadcast", "broadcast_to", "cast", "cat", "cdiv", "ceil", "clamp",
    "const", "constexpr", "cos", "cumprod", "cumsum", "debug_barrier", "device_assert", "device_print", "div_rn", "dot",
    "dot_scaled", "dtype", "erf", "exp", "exp2", "expand_dims", "fdiv", "flip", "float16", "float32", "float64",
    "float8e4b15", "float8e4b8", "float8e4nv", "float8e5", "float8e5b16", "floor", "fma", "full", "gather", "histogram",
    "inline_asm_elementwise", "int1", "int16", "int32", "int64", "int8", "interleave", "join", "load",
    "load_tensor_descriptor", "log", "log2", "make_block_ptr", "make_tensor_descriptor", "map_elementwise", "max",
    "max_constancy", "max_contiguous", "maximum", "min", "minimum", "mul", "multiple_of", "num_programs", "permute",
    "philox", "pi32_t", "pointer_type", "program_id", "rand", "rand4x", "randint", "randint4x", "randn", "randn4x",
    "range", "ravel", "reduce", "reduce_or", "reshape", "rsqrt", "sigmoid", "sin", "slice", "softmax", "sort", "split",
    "sqrt", "sqrt_rn", "static_assert", "static_print", "static_range", "store", "store_tensor_descriptor", "sub", "sum",
    "swizzle2d", "tensor", "tensor_descriptor", "topk", "trans", "tuple", "uint16", "uint32", "uint64", "uint8",
    "umulhi", "view", "void", "where", "xor_sum", "zeros", "zeros_like",
    "math.abs", "math.ceil", "math.cos", "math.div_rn", "math.erf", "math.exp", "math.exp2", "math.fdiv", "math.floor",
    "math.fma", "math.log", "math.log2", "math.rsqrt", "math.sin", "math.sqrt", "math.sqrt_rn", "math.umulhi",
)
#: the CuTe DSL (nvidia-cutlass-dsl): what examples/cute_dsl uses and its common layout algebra
_CUTE: Final = (
    "kernel", "jit", "compile", "Tensor", "Shape", "Layout", "Int32", "Float32", "Float16", "BFloat16", "size",
    "make_layout", "make_ordered_layout", "make_layout_tv", "make_identity_tensor", "zipped_divide", "logical_divide",
    "local_tile", "make_copy_atom", "make_tiled_copy_tv", "make_fragment_like", "make_fragment", "make_rmem_tensor",
    "elem_less", "copy", "arch.thread_idx", "arch.block_idx", "arch.block_dim", "arch.grid_dim", "arch.sync_threads",
    "nvgpu.CopyUniversalOp", "runtime.from_dlpack", "runtime.make_ptr",
)
_NUMPY: Final = (
    "ndarray", "dtype", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool_", "array",
    "asarray", "zeros", "zeros_like", "ones", "ones_like", "empty", "empty_like", "full", "arange", "linspace", "prod",
    "sum", "mean", "sqrt", "exp", "log", "abs", "maximum", "minimum", "allclose", "isclose", "testing.assert_allclose",
    "random.default_rng", "random.seed", "random.rand", "random.randn", "random.randint", "pi", "inf", "nan",
)
_STDLIB: Final = (
    "math.*", "cmath.*", "itertools.*", "functools.partial", "functools.reduce", "functools.lru_cache",
    "functools.cache", "functools.wraps", "functools.cached_property", "dataclasses.dataclass", "dataclasses.field",
    "dataclasses.fields", "dataclasses.replace", "enum.Enum", "enum.IntEnum", "enum.auto", "typing.Any",
    "typing.Optional", "typing.Union", "typing.Callable", "typing.Sequence", "typing.Mapping", "typing.Iterable",
    "typing.Iterator", "typing.Tuple", "typing.List", "typing.Dict", "typing.Literal", "typing.Final",
    "typing.TYPE_CHECKING", "typing.NamedTuple", "typing.TypeVar", "typing.Protocol", "typing.overload", "typing.cast",
    "collections.abc.Sequence", "collections.abc.Mapping", "collections.abc.Callable", "collections.abc.Iterable",
    "collections.abc.Iterator", "collections.namedtuple", "collections.defaultdict", "collections.OrderedDict",
    "contextlib.contextmanager", "contextlib.nullcontext", "time.perf_counter", "time.perf_counter_ns",
    "time.monotonic", "time.sleep", "warnings.warn", "random.random", "random.randint", "random.seed",
    "random.Random", "random.uniform", "random.gauss", "__future__.annotations", "statistics.mean",
    "statistics.fmean", "statistics.median", "statistics.stdev", "statistics.pstdev", "statistics.variance",
    "statistics.quantiles", "statistics.geometric_mean", "statistics.harmonic_mean", "collections.Counter",
    "collections.deque", "queue.Queue", "threading.Thread", "threading.Event", "threading.Lock", "os.environ",
    "sys.exit", "sys.version_info", "sys.maxsize",
)

#: what a closed file may use from outside: dotted names of functions, classes and constants
#: (never a module: past an entry, attributes are a value's), or ``module.*`` for a module none
#: of whose names is a module or loads anything (math, itertools, torch.linalg)
ALLOWED: Final = frozenset({
    *(f"torch.{name}" for name in _TORCH), *(f"triton.{name}" for name in _TRITON),
    *(f"triton.language.{name}" for name in _TRITON_LANGUAGE), *(f"cutlass.cute.{name}" for name in _CUTE),
    "cutlass.Boolean", "cutlass.Int32", "cutlass.Float32", "cutlass.Float16", "cutlass.BFloat16", "cutlass.range",
    "cutlass.const_expr", "cuda.bindings.driver.CUstream", "flashinfer.norm.rmsnorm",
    *(f"numpy.{name}" for name in _NUMPY), *_STDLIB,
})

_BUILTIN_NAMES = frozenset(vars(builtins))


def allowed(dotted: str) -> bool:
    """Whether ``dotted`` (``torch.randn``, ``torch.float16.itemsize``) starts with an entry of
    :data:`ALLOWED`: an entry itself, or one name under a ``module.*`` entry (what follows it is
    a value's attribute)."""
    parts = dotted.split(".")
    for end in range(1, len(parts) + 1):
        prefix = ".".join(parts[:end])
        if prefix in ALLOWED or (end >= 2 and ".".join(parts[: end - 1]) + ".*" in ALLOWED):
            return True
    return False


@dataclass(frozen=True, slots=True)
class _Binding:
    """What an import binds a name to: a dotted name outside the repository, or a place in it
    (a module file, or a folder for a namespace package) and the attributes taken under it."""

    external: str | None = None
    place: Path | None = None
    attrs: tuple[str, ...] = ()


#: a chain that ends on a repository module itself (a module passed around as a value)
_LOCAL_MODULE: Final = "a repository module as a value"


class OpenReach:
    """Where each Python file reaches code or files other than through its stated imports.

    ``roots`` are where a top-level import is looked for (the kernel file's folder, the suite
    root, the repository root); ``tree`` is the repository: a module inside it is the
    repository's own and is followed, one outside it is another package's. Each file is parsed
    once.
    """

    __slots__ = ("roots", "tree", "_bindings", "_found", "_installed")

    def __init__(self, roots: Sequence[Path], tree: Path) -> None:
        self.roots = tuple(roots)
        self.tree = tree.resolve()
        self._bindings: dict[Path, dict[str, _Binding]] = {}
        self._found: dict[Path, str | None] = {}
        self._installed: dict[str, bool] = {}

    def first(self, source: Path) -> str | None:
        """``LINE (what)`` of the first use in ``source`` that is not known to be safe, or None
        where the file is closed (or does not parse: then it is no module of the kernel's)."""
        if source not in self._found:
            self._found[source] = self._first(source)
        return self._found[source]

    def _first(self, source: Path) -> str | None:
        parsed = _parse(source)
        if parsed is None:
            return None
        # The first by line; on one line, what a name means before what a value's attribute is.
        found = min(self._open_uses(source, parsed), key=_reading_order, default=None)
        return None if found is None else f"{found[0].lineno} ({found[1]})"

    def _open_uses(self, source: Path, parsed: ast.Module) -> Iterator[tuple[ast.expr | ast.stmt, str]]:
        bindings = self._bindings_of(source, parsed)
        bound = _bound_names(parsed)
        parents = {id(child): node for node in ast.walk(parsed) for child in ast.iter_child_nodes(node)}
        checked_calls: set[int] = set()
        for node in ast.walk(parsed):
            if isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
                yield node, f"from {'.' * node.level}{node.module or ''} import *"
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _ATTRIBUTE_BUILTINS:
                name = _constant_attribute(node)
                if name is None:
                    yield node, f"{node.func.id}() with a computed name"
                    continue
                checked_calls.add(id(node.func))
                target = node.args[0]
                if isinstance(target, ast.Name) and target.id in bindings:
                    checked_calls.add(id(target))
                    yield from self._check_chain(node, bindings[target.id], (name,))
                elif _is_dunder(name) and name not in SAFE_DUNDERS:
                    yield node, f"{node.func.id}(..., {name!r})"
            elif isinstance(node, ast.Attribute):
                if _is_dunder(node.attr) and node.attr not in SAFE_DUNDERS:
                    yield node, f".{node.attr}"
                elif node.attr in VALUE_LOADERS:
                    yield node, f".{node.attr}(...)"
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and id(node) not in checked_calls:
                yield from self._check_name(node, bindings, bound, parents)

    def _check_name(
        self, node: ast.Name, bindings: dict[str, _Binding], bound: frozenset[str], parents: dict[int, ast.AST]
    ) -> Iterator[tuple[ast.expr | ast.stmt, str]]:
        name = node.id
        if name in bindings:
            attrs: list[str] = []
            current: ast.AST = node
            while isinstance(parent := parents.get(id(current)), ast.Attribute) and parent.value is current:
                attrs.append(parent.attr)
                current = parent
            yield from self._check_chain(node, bindings[name], tuple(attrs), spelled=name)
        elif _is_dunder(name):
            # Whether or not the file assigns it: ``__builtins__`` and ``__file__`` are the
            # interpreter's, and a store to one does not make a load of it safe.
            if name not in _SAFE_MODULE_NAMES and name not in SAFE_BUILTINS:
                yield node, name
        elif name in _BUILTIN_NAMES:
            if name not in SAFE_BUILTINS:
                yield node, name
        elif name not in bound:
            yield node, f"{name}, bound nowhere in the file"

    def _check_chain(
        self, node: ast.expr, binding: _Binding, attrs: tuple[str, ...], spelled: str | None = None
    ) -> Iterator[tuple[ast.expr | ast.stmt, str]]:
        resolved = self._resolve(binding, attrs, depth=0)
        if resolved is None:
            return
        if resolved == _LOCAL_MODULE:
            yield node, f"{'.'.join(filter(None, (spelled, *attrs)))} (a repository module) as a value"
        elif not allowed(resolved):
            yield node, resolved

    def _resolve(self, binding: _Binding, attrs: tuple[str, ...], depth: int) -> str | None:
        """The dotted name outside the repository that ``binding.attrs`` reaches, None for the
        repository's own code (checked in its own file), or :data:`_LOCAL_MODULE`."""
        place = binding.place
        if binding.external is not None or place is None:
            return ".".join(filter(None, (binding.external, *attrs)))
        names = (*binding.attrs, *attrs)
        if depth > 32:
            return "an import chain too long to follow"
        if not names:
            return _LOCAL_MODULE
        first, rest = names[0], names[1:]
        if place.is_file():
            parsed = _parse(place)
            inner = self._bindings_of(place, parsed) if parsed is not None else {}
            if first in inner:
                return self._resolve(inner[first], rest, depth + 1)
            package = place.parent if place.name == "__init__.py" else None
        else:
            package = place
        submodule = _module_place(package, first) if package is not None else None
        if submodule is not None:
            return self._resolve(_Binding(place=submodule), rest, depth + 1)
        return None  # a name the module defines: the repository's code

    def _bindings_of(self, source: Path, parsed: ast.Module) -> dict[str, _Binding]:
        if source not in self._bindings:
            self._bindings[source] = dict(self._import_bindings(source, parsed))
        return self._bindings[source]

    def _import_bindings(self, source: Path, parsed: ast.Module) -> Iterator[tuple[str, _Binding]]:
        for node in ast.walk(parsed):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    if alias.asname is None:
                        yield parts[0], self._module_binding(parts[:1], self.roots)
                    else:
                        yield alias.asname, self._module_binding(parts, self.roots)
            elif isinstance(node, ast.ImportFrom):
                parts = node.module.split(".") if node.module else []
                bases: Sequence[Path] = self.roots
                if node.level:
                    package = source.parent
                    for _ in range(node.level - 1):
                        package = package.parent
                    bases = (package,)
                module = self._module_binding(parts, bases, relative=bool(node.level))
                for alias in node.names:
                    if alias.name != "*":
                        yield alias.asname or alias.name, _Binding(
                            external=f"{module.external}.{alias.name}" if module.external is not None else None,
                            place=module.place, attrs=(*module.attrs, alias.name))

    def _module_binding(self, parts: Sequence[str], bases: Sequence[Path], *, relative: bool = False) -> _Binding:
        """The repository's module ``parts`` under the first of ``bases`` that has it, else the
        other package of that name. An installed package of that name wins: the worker has
        imported most of them before the kernel's file (torch, pickle), and a file of the
        repository named so is a dependency all the same, its uses checked against the list."""
        if not relative and parts and self._installed_elsewhere(parts[0]):
            return _Binding(external=".".join(parts))
        for base in bases:
            place: Path | None = base
            for part in parts:
                place = _module_place(place, part) if place is not None else None
            if place is not None and _inside(place, self.tree):
                if not parts and (place / "__init__.py").is_file():
                    place = place / "__init__.py"  # `from . import x`: x may be the package's name
                return _Binding(place=place)
        if relative:
            # A relative import that resolves to no file: nothing outside the repository either.
            return _Binding(place=bases[0])
        return _Binding(external=".".join(parts))

    def _installed_elsewhere(self, name: str) -> bool:
        """Whether a module ``name`` is the interpreter's own or is found on this process's
        ``sys.path`` outside the repository (finding runs no module). The working folder is
        left out: it is a checkout of the repository, maybe the other side's."""
        if name not in self._installed:
            cwd = Path.cwd().resolve()
            entries = [entry for entry in sys.path
                       if entry and Path(entry).resolve() != cwd and not _inside(Path(entry), self.tree)]
            try:
                spec = (importlib.machinery.BuiltinImporter.find_spec(name)
                        or importlib.machinery.FrozenImporter.find_spec(name)
                        or importlib.machinery.PathFinder.find_spec(name, entries))
            except (ImportError, ValueError):
                spec = None
            self._installed[name] = spec is not None
        return self._installed[name]


def _module_place(package: Path, name: str) -> Path | None:
    """Where ``package.name`` is: a module file, a package's ``__init__.py``, or a folder (a
    namespace package); None where there is none."""
    folder = package.parent if package.is_file() else package
    if package.is_file() and package.name != "__init__.py":
        return None  # attributes of a plain module are its own names
    for place in (folder / name / "__init__.py", folder / f"{name}.py"):
        if place.is_file():
            return place
    return folder / name if (folder / name).is_dir() else None


def _reading_order(found: tuple[ast.expr | ast.stmt, str]) -> tuple[int, bool, int]:
    """By line; on one line, what a name means before what a value's attribute is, then by column."""
    node, what = found
    return node.lineno, what.startswith("."), node.col_offset


def _inside(path: Path, tree: Path) -> bool:
    return path.resolve().is_relative_to(tree)


def _parse(source: Path) -> ast.Module | None:
    try:
        return ast.parse(source.read_bytes(), filename=str(source))
    except (OSError, SyntaxError, ValueError):
        return None


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _constant_attribute(call: ast.Call) -> str | None:
    """The attribute name a ``getattr(obj, "name", ...)`` call states, None where it computes it."""
    if len(call.args) >= 2 and isinstance(call.args[1], ast.Constant) and isinstance(call.args[1].value, str):
        return call.args[1].value
    return None


def _bound_names(parsed: ast.Module) -> frozenset[str]:
    """Every name the file binds anywhere (scope is ignored: a name bound anywhere is taken to
    be the file's own wherever it is read)."""
    names: set[str] = set()
    for node in ast.walk(parsed):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
    return frozenset(names)
