# Runs numpy's own test modules in the sandbox, which has no pytest: a
# subset of pytest (marks, parametrize, fixtures with params, raises, warns,
# skip) that those modules use, registered as the module "pytest", and a
# runner. f(modules) returns per-module counts and the first failures.
import sys, types, inspect, itertools, re, warnings, traceback, importlib, builtins

pytest = types.ModuleType("pytest")


class Skipped(Exception):
    pass


class Failed(AssertionError):
    pass


class Mark:
    def __init__(self, name, args, kwargs):
        self.name, self.args, self.kwargs = name, args, kwargs

    def __call__(self, obj):
        obj.pytestmark = list(getattr(obj, "pytestmark", [])) + [self]
        return obj


class MarkGenerator:
    def __getattr__(self, name):
        def mark(*args, **kwargs):
            # A bare @pytest.mark.name decorates directly.
            if len(args) == 1 and callable(args[0]) and not kwargs and name != "parametrize":
                return Mark(name, (), {})(args[0])
            return Mark(name, args, kwargs)
        return mark


class Param:
    def __init__(self, values, marks, id):
        self.values, self.marks, self.id = values, marks, id


def param(*values, marks=(), id=None):
    return Param(values, marks if isinstance(marks, (list, tuple)) else [marks], id)


class ExceptionInfo:
    value = type = None

    def match(self, regexp):
        if not re.search(regexp, str(self.value)):
            raise AssertionError("%r does not match %r" % (regexp, str(self.value)))
        return True


class RaisesContext:
    def __init__(self, expected, match):
        self.expected, self.match, self.info = expected, match, ExceptionInfo()

    def __enter__(self):
        return self.info

    def __exit__(self, tp, value, tb):
        if tp is None:
            raise Failed("DID NOT RAISE %r" % (self.expected,))
        if not issubclass(tp, self.expected):
            return False
        self.info.value, self.info.type = value, tp
        if self.match is not None:
            self.info.match(self.match)
        return True


def raises(expected, *args, match=None, **kwargs):
    ctx = RaisesContext(expected, match)
    if not args:
        return ctx
    with ctx:
        args[0](*args[1:], **kwargs)
    return ctx.info


class WarnsContext:
    def __init__(self, category, match):
        self.category, self.match = category, match

    def __enter__(self):
        self.cw = warnings.catch_warnings(record=True)
        self.list = self.cw.__enter__()
        warnings.simplefilter("always")
        return self.list

    def __exit__(self, tp, value, tb):
        self.cw.__exit__(tp, value, tb)
        if tp is not None:
            return False
        for w in self.list:
            if issubclass(w.category, self.category) and (self.match is None or re.search(self.match, str(w.message))):
                return False
        raise Failed("DID NOT WARN %r" % (self.category,))


def warns(category=Warning, *args, match=None, **kwargs):
    ctx = WarnsContext(category, match)
    if not args:
        return ctx
    with ctx:
        return args[0](*args[1:], **kwargs)


def skip(reason=""):
    raise Skipped(reason)


def fail(reason=""):
    raise Failed(reason)


def importorskip(name, *a, **k):
    try:
        return importlib.import_module(name)
    except ImportError:
        raise Skipped("no " + name)


def fixture(*args, params=None, **kwargs):
    def deco(fn):
        fn._fixture_params = params
        return fn
    if len(args) == 1 and callable(args[0]):
        return deco(args[0])
    return deco


def approx(expected, rel=1e-6, abs=1e-12):
    class Approx:
        def __eq__(self, other):
            return builtins.abs(other - expected) <= max(abs, rel * builtins.abs(expected))
    return Approx()


for _name, _value in dict(mark=MarkGenerator(), param=param, raises=raises, warns=warns, skip=skip, fail=fail,
                          importorskip=importorskip, fixture=fixture, approx=approx, skip_exception=Skipped).items():
    setattr(pytest, _name, _value)
skip.Exception = Skipped
sys.modules["pytest"] = pytest


class Request:
    def __init__(self, param):
        self.param = param


def marks_of(*objs):
    out = []
    for o in objs:
        out += getattr(o, "pytestmark", [])
    return out


def expand(fn, marks):
    """Yields (id, kwargs, marks) for every parametrize combination."""
    axes = []
    for m in marks:
        if m.name != "parametrize":
            continue
        names, values = m.args[0], m.args[1]
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",") if n.strip()]
        single = len(names) == 1
        axis = []
        for i, v in enumerate(values):
            extra = []
            if isinstance(v, Param):
                extra, v = v.marks, v.values if not single else v.values[0]
            vals = (v,) if single else tuple(v)
            axis.append((str(i), dict(zip(names, vals)), extra))
        axes.append(axis)
    for combo in itertools.product(*axes):
        kw, ms, ids = {}, [], []
        for i, k, m in combo:
            kw.update(k)
            ms += m
            ids.append(i)
        yield "-".join(ids), kw, ms


def apply_filter(spec):
    action, message, category = (spec.split(":") + ["", ""])[:3]
    cat = Warning
    if category:
        mod, _, name = category.rpartition(".")
        cat = getattr(importlib.import_module(mod) if mod else builtins, name)
    warnings.filterwarnings(action.strip(), message.strip(), cat)


def run_one(call, marks):
    """Runs call() and says how it went."""
    for m in marks:
        if m.name == "skipif" and (not m.args or m.args[0]):
            return "skipped", m.kwargs.get("reason", "")
        if m.name == "skip":
            return "skipped", m.kwargs.get("reason", "")
    xfail = [m for m in marks if m.name == "xfail" and (not m.args or m.args[0])]
    with warnings.catch_warnings():
        # numpy's pytest.ini: warnings are errors, but for these.
        warnings.simplefilter("error")
        for spec in ("ignore:Not importing directory", "ignore: divide by zero encountered in log",
                     "ignore: invalid value encountered in log", "ignore:the matrix subclass is not",
                     "ignore:Importing from numpy.matlib is"):
            apply_filter(spec)
        for m in marks:
            if m.name == "filterwarnings":
                apply_filter(m.args[0])
        try:
            call()
        except Skipped as e:
            return "skipped", str(e)
        except BaseException as e:
            if xfail:
                return "xfailed", ""
            return "failed", "".join(traceback.format_exception_only(type(e), e)).strip()[:300]
    return "passed", ""


def fixtures_for(fn, owner, module, kwargs):
    """The fixture values fn needs beyond kwargs, as a list of choices."""
    names = [n for n in inspect.signature(fn).parameters if n not in kwargs and n != "self"]
    choices = []
    for n in names:
        fx = getattr(owner, n, None) if owner is not None else None
        fx = fx or getattr(module, n, None)
        if not hasattr(fx, "_fixture_params"):
            return None
        params = fx._fixture_params or [None]
        choices.append([(n, fx, p) for p in params])
    return itertools.product(*choices)


def run_test(module, owner, name, counts, failures):
    fn = getattr(owner or module, name)
    base = marks_of(module, owner, fn) if owner is not None else marks_of(module, fn)
    for pid, kwargs, pmarks in expand(fn, base):
        combos = fixtures_for(fn, owner, module, kwargs)
        label = "%s::%s%s[%s]" % (module.__name__, (owner.__name__ + "::") if owner else "", name, pid)
        if combos is None:
            counts["skipped"] += 1
            continue
        for combo in combos:
            def call():
                inst = owner() if owner is not None else None
                if inst is not None and hasattr(inst, "setup_method"):
                    inst.setup_method(getattr(inst, name))
                target = getattr(inst, name) if inst is not None else fn
                kw = dict(kwargs)
                for n, fx, p in combo:
                    bound = getattr(inst, fx.__name__) if inst is not None and hasattr(owner, fx.__name__) else fx
                    wants = inspect.signature(bound).parameters
                    kw[n] = bound(Request(p)) if "request" in wants else bound()
                try:
                    target(**kw)
                finally:
                    if inst is not None and hasattr(inst, "teardown_method"):
                        inst.teardown_method(getattr(inst, name))
            outcome, msg = run_one(call, base + pmarks)
            counts[outcome] += 1
            if outcome == "failed" and len(failures) < 20:
                failures.append(label + ": " + msg)


def f(modules):
    report = {"modules": {}, "failures": []}
    for modname in modules:
        counts = dict(passed=0, failed=0, skipped=0, xfailed=0)
        module = importlib.import_module(modname)
        for name, obj in sorted(vars(module).items()):
            if name.startswith("test") and inspect.isfunction(obj):
                run_test(module, None, name, counts, report["failures"])
            elif name.startswith("Test") and inspect.isclass(obj) and getattr(obj, "__module__", "") == modname:
                for meth in sorted(dir(obj)):
                    if meth.startswith("test") and callable(getattr(obj, meth)):
                        run_test(module, obj, meth, counts, report["failures"])
        report["modules"][modname] = counts
    return report
