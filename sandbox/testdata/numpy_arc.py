# The numpy operations models use most in ARC transforms, on fixed grids.
# Every result is plain JSON (tolist, int), so that the sandbox's numpy and
# a native one can be compared value for value.
import numpy as np


def f():
    g = np.array([[0, 1, 2, 0], [3, 0, 0, 4], [0, 5, 6, 0]])
    out = {}
    out["shape"] = list(g.shape)
    out["dtype_default"] = str(np.array([1, 2]).dtype) in ("int64", "int32")
    out["index"] = int(g[1, 3])
    out["row"] = g[1].tolist()
    out["col"] = g[:, 2].tolist()
    out["slice"] = g[1:, ::2].tolist()
    out["neg_slice"] = g[::-1, -2:].tolist()
    out["fancy"] = g[[0, 2], [1, 2]].tolist()
    out["rot90"] = np.rot90(g).tolist()
    out["rot90_k3"] = np.rot90(g, k=3).tolist()
    out["flip"] = np.flip(g).tolist()
    out["fliplr"] = np.fliplr(g).tolist()
    out["flipud"] = np.flipud(g).tolist()
    out["transpose"] = g.T.tolist()
    out["where3"] = np.where(g > 2, g, -1).tolist()
    out["where1"] = [a.tolist() for a in np.where(g == 0)]
    vals, counts = np.unique(g, return_counts=True)
    out["unique"] = vals.tolist()
    out["unique_counts"] = counts.tolist()
    out["unique_rows"] = np.unique(np.array([[1, 2], [1, 2], [0, 3]]), axis=0).tolist()
    out["argwhere"] = np.argwhere(g == 0).tolist()
    mask = g > 0
    out["mask"] = mask.tolist()
    out["masked"] = g[mask].tolist()
    h = g.copy()
    h[mask] = 9
    out["mask_assign"] = h.tolist()
    out["pad"] = np.pad(g, 1).tolist()
    out["pad_edge"] = np.pad(g, ((0, 1), (2, 0)), mode="edge").tolist()
    out["pad_const"] = np.pad(g, 1, constant_values=7).tolist()
    out["tile"] = np.tile(g[:2, :2], (2, 3)).tolist()
    out["repeat"] = np.repeat(g[:1], 2, axis=0).tolist()
    out["kron"] = np.kron(np.array([[1, 0], [0, 1]]), np.array([[2, 3]])).tolist()
    out["concat"] = np.concatenate([g, g], axis=1).tolist()
    out["vstack"] = np.vstack([g[0], g[2]]).tolist()
    out["hstack"] = np.hstack([g[:, :1], g[:, 3:]]).tolist()
    out["stack"] = np.stack([g[0], g[1]], axis=1).tolist()
    out["sum"] = [int(g.sum()), g.sum(axis=0).tolist(), g.sum(axis=1).tolist()]
    out["minmax"] = [int(g.min()), int(g.max()), int(g.argmax()), np.argmax(g, axis=1).tolist()]
    out["count_nonzero"] = int(np.count_nonzero(g))
    out["bincount"] = np.bincount(g.ravel()).tolist()
    out["any_all"] = [bool(mask.any()), bool(mask.all()), mask.any(axis=1).tolist()]
    out["equal"] = bool(np.array_equal(g, np.rot90(np.rot90(g, 2), 2)))
    out["diag"] = np.diag(g).tolist()
    out["roll"] = np.roll(g, 1, axis=1).tolist()
    out["nonzero"] = [a.tolist() for a in np.nonzero(g)]
    out["sort"] = np.sort(g, axis=1).tolist()
    out["argsort"] = np.argsort(g.ravel(), kind="stable").tolist()
    out["full"] = np.full((2, 3), 5).tolist()
    out["zeros_like"] = np.zeros_like(g).tolist()
    out["eye"] = np.eye(3, dtype=int).tolist()
    out["arange_reshape"] = np.arange(12).reshape(3, 4).tolist()
    out["isin"] = np.isin(g, [1, 5]).tolist()
    out["logical"] = np.logical_and(g > 0, g < 5).tolist()
    out["bitwise"] = (g & 1).tolist()
    out["floordiv_mod"] = [(g // 2).tolist(), (g % 3).tolist()]
    out["astype_bool"] = g.astype(bool).tolist()
    for dt in ("int8", "uint8", "int16", "int32", "int64", "uint32"):
        a = np.array([[250, 7], [-3, 128]]).astype(dt)
        # sum's default accumulator is C long: 32 bits on wasm32.
        out["dtype_" + dt] = [str(a.dtype), a.tolist(), (a + a).tolist(), int(a.sum(dtype=np.int64))]
    out["uint8_wrap"] = (np.array([250], dtype=np.uint8) + np.uint8(10)).tolist()
    out["int_overflow_sum"] = int(np.array([2**31 - 1, 1], dtype=np.int64).sum())
    out["float"] = [round(float(np.mean(g)), 9), round(float(np.std(g)), 9), np.median(g, axis=0).tolist()]
    out["labels"] = np.cumsum(mask.ravel()).reshape(g.shape).tolist()
    out["outer"] = np.add.outer(np.arange(3), np.arange(2)).tolist()
    out["broadcast"] = (g[:, :1] * np.arange(4)).tolist()
    out["min_max_nd"] = [np.max(g, axis=0).tolist(), np.min(g, axis=1).tolist()]
    out["clip"] = np.clip(g, 1, 4).tolist()
    out["ravel_index"] = [int(np.ravel_multi_index((1, 3), g.shape)), [int(x) for x in np.unravel_index(7, g.shape)]]
    out["tolist_types"] = [type(g.tolist()[0][0]).__name__, type(g[0, 0].item()).__name__]
    return out
