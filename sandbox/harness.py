# flowrun's Python harness: runs the model's code from stdin, calls its
# function, and reports the result after a marker line on stdout.
import sys, json, marshal, traceback, linecache, _ast
import random as _random

# random is seeded the same in every call, warm or cold, so that code that
# shuffles or samples does the same on a replay; os.urandom, secrets and
# uuid4 draw from the call's own random source (docs/sandbox.md).
_random.seed(0)
del _random

def _main():
    # The request is JSON re-encoded for marshal, which decodes it far
    # faster (sandbox/marshal.go).
    req = marshal.loads(sys.stdin.buffer.read())
    src, call, args = req["source"], req["call"], req["args"]
    marker = "\n\x1eflowrun-result-" + req["nonce"] + "\n"
    out = sys.__stdout__

    def report(result=None, error=None):
        sys.stdout.flush()
        sys.stderr.flush()
        out.write(marker + json.dumps({"result": result, "error": error}) + "\n")
        out.flush()

    def failure(cls, exc):
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<code>"]
        line = frames[-1].lineno if frames else None
        text = "".join(traceback.format_list(frames)) if frames else ""
        msg = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        if isinstance(exc, ModuleNotFoundError):
            msg += " (the sandbox has Python's standard library and numpy only)"
        if text:
            msg = "Traceback (the code's own lines):\n" + text + msg
        report(error={"class": cls, "message": msg, "line": line})

    linecache.cache["<code>"] = (len(src), None, src.splitlines(True), "<code>")
    last = None
    try:
        if call:
            # Straight to bytecode: a tree of Python objects costs about as
            # much as the compiling itself.
            code = compile(src, "<code>", "exec")
        else:
            tree = compile(src, "<code>", "exec", _ast.PyCF_ONLY_AST)
            if tree.body and isinstance(tree.body[-1], _ast.Expr):
                # A snippet's last expression is its result, as in a REPL.
                last = compile(_ast.Expression(tree.body.pop().value), "<code>", "eval")
            code = compile(tree, "<code>", "exec")
    except SyntaxError as e:
        report(error={"class": "compile_error", "message": "%s: %s" % (type(e).__name__, e.msg), "line": e.lineno})
        return
    scope = {"__name__": "__sandbox__", "__builtins__": __builtins__}
    try:
        exec(code, scope)
        result = eval(last, scope) if last is not None else None
        if call:
            fn = scope.get(call)
            if not callable(fn):
                report(error={"class": "runtime_error", "message": "the code defines no function named %r" % call})
                return
            if args is None:
                result = fn()
            elif isinstance(args, list):
                result = fn(*args)
            else:
                result = fn(args)
    except MemoryError as e:
        report(error={"class": "memory_limit", "message": "MemoryError: the code ran out of memory"})
        return
    except BaseException as e:  # SystemExit too: the code must return, not exit
        failure("runtime_error", e)
        return
    try:
        text = json.dumps(result, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as e:
        report(error={"class": "bad_result", "message": "the result is not JSON-serialisable: %s" % e})
        return
    sys.stdout.flush()
    sys.stderr.flush()
    out.write(marker + '{"result": ' + text + ', "error": null}\n')
    out.flush()

if __name__ == "__main__":
    _main()
