// Reads an ONNX model's graph inputs (name, shape, element type) in the browser, so the form can
// fill them in: a small protobuf reader for the few fields on the way, ModelProto.graph →
// GraphProto.input → ValueInfoProto.type → TypeProto.tensor_type → shape. Inputs that are
// initializers (weights, in models exported before IR version 4) are left out.

const MAX_READ_BYTES = 512 * 1024 * 1024;  // larger models: the user types the inputs

// TensorProto.DataType → the description's dtype; others have no dtype kiln accepts.
const DTYPES = { 1: 'float32', 2: 'uint8', 3: 'int8', 6: 'int32', 7: 'int64', 9: 'bool', 10: 'float16', 16: 'bfloat16' };

class Reader {
  constructor(bytes, start = 0, end = bytes.length) {
    this.bytes = bytes;
    this.pos = start;
    this.end = end;
  }
  varint() {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10; ++i) {
      if (this.pos >= this.end) throw new Error('truncated varint');
      const b = this.bytes[this.pos++];
      value += (b & 0x7f) * scale;  // exact up to 2^53, enough for lengths and dims
      if (!(b & 0x80)) return value;
      scale *= 128;
    }
    throw new Error('varint too long');
  }
  // Calls visit(field, wire, reader) per field; length-delimited fields get a sub-reader.
  fields(visit) {
    while (this.pos < this.end) {
      const key = this.varint();
      const field = Math.floor(key / 8);
      const wire = key & 7;
      if (wire === 0) {
        visit(field, wire, this.varint());
      } else if (wire === 2) {
        const length = this.varint();
        if (length > this.end - this.pos) throw new Error('field runs past the end');
        visit(field, wire, new Reader(this.bytes, this.pos, this.pos + length));
        this.pos += length;
      } else if (wire === 1 || wire === 5) {
        this.pos += wire === 1 ? 8 : 4;
      } else {
        throw new Error(`wire type ${wire}`);
      }
    }
  }
  string() {
    return new TextDecoder().decode(this.bytes.subarray(this.pos, this.end));
  }
}

// A symbolic dim as the description's schema wants it: a word of letters, digits, '_'.
function symbolOf(text, index) {
  let s = text.replace(/[^A-Za-z0-9_]/g, '_');
  if (!/^[A-Za-z_]/.test(s)) s = '_' + s;
  return s === '_' ? `dim${index}` : s;
}

function valueInfoRead(reader) {
  const info = { name: '', shape: [], dtype: '' };
  reader.fields((field, wire, value) => {
    if (field === 1 && wire === 2) info.name = value.string();
    if (field !== 2 || wire !== 2) return;
    value.fields((typeField, typeWire, tensor) => {
      if (typeField !== 1 || typeWire !== 2) return;  // tensor_type only
      tensor.fields((f, w, v) => {
        if (f === 1 && w === 0) info.dtype = DTYPES[v] || '';
        if (f !== 2 || w !== 2) return;
        v.fields((dimField, dimWire, dim) => {
          if (dimField !== 1 || dimWire !== 2) return;
          const index = info.shape.length;
          let size = null;
          dim.fields((df, dw, dv) => {
            if (df === 1 && dw === 0) size = dv;
            if (df === 2 && dw === 2) size = symbolOf(dv.string(), index);
          });
          info.shape.push(size === null || size === 0 ? (index === 0 ? 'batch' : `dim${index}`) : size);
        });
      });
    });
  });
  return info;
}

// The model's real inputs; null when the file is too large to read here; throws when it is
// not an ONNX model.
export async function onnxInputsRead(file) {
  if (file.size > MAX_READ_BYTES) return null;
  const bytes = new Uint8Array(await file.arrayBuffer());
  const inputs = [];
  const initializers = new Set();
  let graphSeen = false;
  new Reader(bytes).fields((field, wire, graph) => {
    if (field !== 7 || wire !== 2) return;
    graphSeen = true;
    graph.fields((f, w, v) => {
      if (f === 11 && w === 2) inputs.push(valueInfoRead(v));
      if (f === 5 && w === 2) {
        v.fields((tf, tw, tv) => {
          if (tf === 8 && tw === 2) initializers.add(tv.string());
        });
      }
    });
  });
  if (!graphSeen) throw new Error('not an ONNX model: no graph');
  return inputs.filter((input) => !initializers.has(input.name));
}
