#!/usr/bin/python3
# Run from this directory: /usr/bin/python3 generate.py
# Generates the .npy/.npz fixtures in tests/data/npy (numpy 1.24). Values are simple formulas
# so that the C++ test can recompute them.
import numpy as np, zipfile, io
np.save('f32_2x3.npy', (np.arange(6, dtype=np.float32) * 0.5 - 1).reshape(2, 3))
np.save('f16_5.npy', np.array([0.5, -1.0, 2.0, 65504.0, -0.0], dtype=np.float16))
np.save('f64_2x2.npy', np.array([[1.5, -2.25], [1e10, 1.0 / 3.0]], dtype=np.float64))
np.save('i8_4.npy', np.array([-128, -1, 0, 127], dtype=np.int8))
np.save('u8_3.npy', np.array([0, 7, 255], dtype=np.uint8))
np.save('i32_2x2.npy', np.array([[-2147483648, -1], [0, 2147483647]], dtype=np.int32))
np.save('i64_3.npy', np.array([-(2**63), 5, 2**62], dtype=np.int64))
np.save('bool_2x3.npy', np.array([[True, False, True], [False, False, True]]))
np.save('scalar_f32.npy', np.float32(3.25))
np.save('empty_0x3.npy', np.zeros((0, 3), dtype=np.float32))
np.save('i64_1x1x1x2x1.npy', np.array([7, -7], dtype=np.int64).reshape(1, 1, 1, 2, 1))
for v in [(2, 0), (3, 0)]:
    with open('f32_v%d.npy' % v[0], 'wb') as f:
        np.lib.format.write_array(f, np.arange(4, dtype=np.float32).reshape(2, 2), version=v)
np.save('fortran_2x3.npy', np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
np.save('bigendian_f4.npy', np.arange(3, dtype='>f4'))
np.savez('savez.npz', x=np.arange(6, dtype=np.float32).reshape(2, 3), ids=np.array([1, 2, 3], dtype=np.int64))
np.savez_compressed('savez_compressed.npz', probs=np.array([0.25, 0.5, 0.125], dtype=np.float64),
                    mask=np.array([True, False, True, True]), zeros=np.zeros(200, dtype=np.float32))
with zipfile.ZipFile('bad_entry.npz', 'w') as z:
    b = io.BytesIO(); np.save(b, np.arange(2, dtype=np.float32)); z.writestr('ok.npy', b.getvalue())
    z.writestr('readme.txt', 'not an array')
with zipfile.ZipFile('truncated_entry.npz', 'w') as z:
    b = io.BytesIO(); np.save(b, np.arange(10, dtype=np.float32)); z.writestr('a.npy', b.getvalue()[:-32])
