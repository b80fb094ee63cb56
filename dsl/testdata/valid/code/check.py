def check(result):
    return {"ok": result is not None}
