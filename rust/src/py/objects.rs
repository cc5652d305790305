//! Reading the caller's message objects for the cache without serializing them. On the next
//! turn of a session nearly every message is one the cache has parsed and counted before;
//! serializing it again only to hash the JSON cost as much as everything else a warm assembly
//! does. Here a message of JSON-native objects (dicts, lists, str, int, float, bool, None) is
//! keyed by a walk of its contents, and only the messages the cache misses are written as
//! JSON, from the walk itself. A message holding anything else (an SDK object) is serialized
//! by `ringbound.payload.dump_messages` and keyed by its JSON, so SDK objects and errors are
//! handled as before.
//!
//! The walk holds the GIL, so it does as little as it can: it lays out the structure and the
//! short strings, and takes a reference to each longer string. Hashing (most of the bytes),
//! the cache lookups, the misses' JSON and the plan run with the GIL released, reading the
//! held strings in place.

use std::cell::RefCell;
use std::ops::Range;
use std::ptr::addr_of_mut;
use std::sync::Arc;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use xxhash_rust::xxh3::{xxh3_128, xxh3_128_with_seed};

use crate::cache::{CountCache, Entry};
use crate::error::CoreError;
use crate::json_array;
use crate::request::{check_count, check_size, load_given, Given, Limits, Request, Reread, Scheme};

/// Object keys live apart from JSON keys: the two hash different encodings of a message.
const OBJECT_KEYS: u64 = 1 << 48;

/// Strings up to this long are copied into the encoding during the walk; longer ones are held
/// and hashed in place after it, with the GIL released.
const COPIED_STR_BYTES: usize = 64;

/// Messages per JSON array when the misses are serialized (`payload.DUMP_PART_MESSAGES`).
const PART_MESSAGES: usize = 512;

/// Deeper nesting is left to the serializer (and to the parser's own nesting limit).
const MAX_DEPTH: usize = 64;

static ORJSON_DUMPS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `orjson.dumps(messages)` of JSON-native messages, walked again just before: orjson runs no
/// Python code on the built-in types (an enum's `value` aside), so no other thread can change
/// them between the walk and the serialization, and the keys are those of the JSON. (Between
/// the first walk and this one, with the GIL released, the caller may have changed them.)
/// None when a message is no longer JSON-native.
pub(super) fn dump_walked<'py>(
    messages: &Bound<'py, PyList>,
    seed: u64,
) -> Option<(Vec<u128>, Bound<'py, PyBytes>)> {
    let py = messages.py();
    let mut walk = Walk::new(messages, true);
    let keys = walk
        .encoding
        .keys(seed)
        .into_iter()
        .collect::<Option<Vec<_>>>()?;
    let dumps = ORJSON_DUMPS.import(py, "orjson", "dumps").ok()?;
    let json = dumps.call1((messages,)).ok()?;
    Some((keys, json.cast_into::<PyBytes>().ok()?))
}

/// `ringbound.payload.dump_messages(messages, indices)`: the JSON arrays of those messages.
fn dump<'py>(
    py: Python<'py>,
    messages: &Bound<'py, PyList>,
    indices: Vec<usize>,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let dump = super::hooks::hooks(py)?.dump_messages.bind(py);
    dump.call1((messages, indices))?.extract()
}

/// The messages' contents in a tagged encoding: a tag per value, and a length per string,
/// dict and list. A string longer than `COPIED_STR_BYTES` stands as its length and a 128-bit
/// hash of its bytes, written after the walk with the GIL released. Two messages get the
/// same key only if their contents are equal, and so serialize to the same JSON.
#[derive(Default)]
struct Encoding {
    tags: Vec<u8>,
    /// Each long string: where its hash goes in `tags`, and where its UTF-8 bytes are.
    strings: Vec<(usize, *const u8, usize)>,
    /// Each message's part of `tags`; None when it holds anything that is not JSON-native
    /// (or nests deeper than `MAX_DEPTH`).
    messages: Vec<Option<Range<usize>>>,
}

// SAFETY: the string pointers are only read, and only while the walk that owns this
// encoding holds the strings (see `Walk`); nothing in it is tied to a thread.
unsafe impl Send for Encoding {}
unsafe impl Sync for Encoding {}

impl Encoding {
    /// Each message's key: the hashes of the long strings written in, then each message's
    /// part of `tags` hashed whole (one pass each, no streaming state).
    fn keys(&mut self, seed: u64) -> Vec<Option<u128>> {
        for &(at, data, len) in &self.strings {
            // SAFETY: a held string's UTF-8 bytes, alive and unchanged while it is held.
            let bytes = unsafe { std::slice::from_raw_parts(data, len) };
            self.tags[at..at + 16].copy_from_slice(&xxh3_128(bytes).to_le_bytes());
        }
        let tags = &self.tags;
        let seed = seed ^ OBJECT_KEYS;
        let key = |span: &Option<Range<usize>>| {
            span.clone()
                .map(|span| xxh3_128_with_seed(&tags[span], seed))
        };
        self.messages.iter().map(key).collect()
    }

    /// The JSON of message `i`, written from its encoding (the long strings read where they
    /// are held): what the serializer writes of it, parsed alike. None when the message is
    /// not JSON-native, or holds a float JSON cannot carry (the serializer's to write).
    fn json(&self, i: usize) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        self.write_json(i, &mut out)?;
        Some(out)
    }

    /// `json` of message `i`, written into `out` (cleared first).
    fn write_json(&self, i: usize, out: &mut Vec<u8>) -> Option<()> {
        let span = self.messages.get(i)?.clone()?;
        // The long strings of this message, in the order the walk met them.
        let first = self.strings.partition_point(|&(at, _, _)| at < span.start);
        out.clear();
        let mut w = JsonWriter {
            tags: &self.tags[..span.end],
            at: span.start,
            strings: self.strings[first..].iter(),
            out,
        };
        w.value()?;
        (w.at == span.end).then_some(())
    }

    fn push_len(&mut self, tag: u8, len: usize) {
        self.tags.push(tag);
        self.tags.extend_from_slice(&(len as u64).to_le_bytes());
    }
}

/// Writes JSON from an `Encoding`'s tags (see `Encoding::json`).
struct JsonWriter<'e> {
    tags: &'e [u8],
    at: usize,
    strings: std::slice::Iter<'e, (usize, *const u8, usize)>,
    out: &'e mut Vec<u8>,
}

impl JsonWriter<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let bytes = self.tags.get(self.at..self.at + n)?;
        self.at += n;
        Some(bytes)
    }

    fn word(&mut self) -> Option<[u8; 8]> {
        self.take(8)?.try_into().ok()
    }

    fn len(&mut self) -> Option<usize> {
        usize::try_from(u64::from_le_bytes(self.word()?)).ok()
    }

    fn string(&mut self, tag: u8) -> Option<()> {
        let len = self.len()?;
        let bytes = if tag == b's' {
            let tags = self.tags;
            let bytes = tags.get(self.at..self.at + len)?;
            self.at += len;
            bytes
        } else {
            let &(at, data, held) = self.strings.next()?;
            if at != self.at || held != len {
                return None;
            }
            self.at += 16;
            // SAFETY: a held string's UTF-8 bytes, alive and unchanged while it is held.
            unsafe { std::slice::from_raw_parts(data, len) }
        };
        // UTF-8 as Python gave it (`PyUnicode_AsUTF8AndSize`); the parser checks it anyway.
        crate::json::write::write_utf8(self.out, bytes);
        Some(())
    }

    fn value(&mut self) -> Option<()> {
        let tag = *self.take(1)?.first()?;
        match tag {
            b's' | b'S' => self.string(tag)?,
            b'{' | b'[' => {
                let n = self.len()?;
                self.out.push(tag);
                for k in 0..n {
                    if k > 0 {
                        self.out.push(b',');
                    }
                    if tag == b'{' {
                        let key = *self.take(1)?.first()?;
                        if key != b's' && key != b'S' {
                            return None;
                        }
                        self.string(key)?;
                        self.out.push(b':');
                    }
                    self.value()?;
                }
                self.out.push(if tag == b'{' { b'}' } else { b']' });
            }
            b'n' => self.out.extend_from_slice(b"null"),
            b't' => self.out.extend_from_slice(b"true"),
            b'f' => self.out.extend_from_slice(b"false"),
            b'i' => {
                let n = i64::from_le_bytes(self.word()?);
                self.out.extend_from_slice(n.to_string().as_bytes());
            }
            b'd' => {
                let f = f64::from_bits(u64::from_le_bytes(self.word()?));
                if !f.is_finite() {
                    return None;
                }
                serde_json::to_writer(&mut *self.out, &f).ok()?;
            }
            _ => return None,
        }
        Some(())
    }
}

/// The walk of a request's messages, made under the GIL.
pub struct Walk<'py> {
    /// The strings `encoding` points into. A reference to each keeps it alive, and a str never
    /// changes, so its bytes can be read with the GIL released even if the caller's containers
    /// change meanwhile.
    held: Vec<Bound<'py, PyAny>>,
    encoding: Encoding,
}

impl<'py> Walk<'py> {
    /// Walks `messages` (only to count them, when `keyed` is false: nothing is looked up).
    pub fn new(messages: &Bound<'py, PyList>, keyed: bool) -> Walk<'py> {
        let mut walk = Walk {
            held: Vec::new(),
            encoding: SPARE.with(RefCell::take),
        };
        for message in messages.iter() {
            let start = walk.encoding.tags.len();
            let native = keyed && walk.encode_item(&message, 0);
            let e = &mut walk.encoding;
            e.messages.push(native.then_some(start..e.tags.len()));
        }
        walk
    }

    /// Each message's key and its cache entry if there is one. Needs no GIL.
    pub fn look_up(&mut self) -> Lookup<'_> {
        Lookup(&mut self.encoding)
    }

    fn encode_item(&mut self, obj: &Bound<'py, PyAny>, depth: usize) -> bool {
        // SAFETY: `obj` is alive and bound to the GIL; see `encode_fast`.
        unsafe { self.encode_fast(obj.py(), obj.as_ptr(), depth) }
    }

    /// `encode` for the exact built-in types, on borrowed pointers: through the safe API most
    /// of the walk's time went to reference counts, type-flag calls and the size checks of the
    /// dict iterator. Subclasses and the other types go to `encode`, which encodes them alike.
    ///
    /// # Safety
    /// `obj` is a live object and the GIL is held (`py`). No Python code runs while the walk
    /// of a message holds borrowed items: no call here runs any or allocates a Python object
    /// that could start a collection, so the containers cannot change under it. The one
    /// exception, a str that cannot be UTF-8 raising its error, ends the walk of that message
    /// before anything borrowed is read again; the next message comes from an owned reference.
    unsafe fn encode_fast(
        &mut self,
        py: Python<'py>,
        obj: *mut ffi::PyObject,
        depth: usize,
    ) -> bool {
        unsafe {
            let ty = ffi::Py_TYPE(obj);
            if ty == addr_of_mut!(ffi::PyUnicode_Type) {
                let mut size: ffi::Py_ssize_t = 0;
                let data = ffi::PyUnicode_AsUTF8AndSize(obj, &mut size);
                if data.is_null() {
                    // A lone surrogate: the serializer's to refuse.
                    ffi::PyErr_Clear();
                    return false;
                }
                let bytes = std::slice::from_raw_parts(data.cast::<u8>(), size as usize);
                self.push_str(bytes, || Bound::from_borrowed_ptr(py, obj));
                return true;
            }
            if depth >= MAX_DEPTH {
                return false;
            }
            if ty == addr_of_mut!(ffi::PyDict_Type) {
                self.encoding.push_len(b'{', ffi::PyDict_Size(obj) as usize);
                let mut pos: ffi::Py_ssize_t = 0;
                let mut key: *mut ffi::PyObject = std::ptr::null_mut();
                let mut value: *mut ffi::PyObject = std::ptr::null_mut();
                while ffi::PyDict_Next(obj, &mut pos, &mut key, &mut value) != 0 {
                    // JSON keys are strings; the serializer refuses any other key.
                    let is_str = ffi::Py_TYPE(key) == addr_of_mut!(ffi::PyUnicode_Type)
                        || Bound::from_borrowed_ptr(py, key).cast::<PyString>().is_ok();
                    if !is_str
                        || !self.encode_fast(py, key, depth)
                        || !self.encode_fast(py, value, depth + 1)
                    {
                        return false;
                    }
                }
                return true;
            }
            if ty == addr_of_mut!(ffi::PyList_Type) {
                let n = ffi::PyList_Size(obj);
                self.encoding.push_len(b'[', n as usize);
                return (0..n)
                    .all(|i| self.encode_fast(py, ffi::PyList_GetItem(obj, i), depth + 1));
            }
            if obj == ffi::Py_None() {
                self.encoding.tags.push(b'n');
                return true;
            }
            if ty == addr_of_mut!(ffi::PyLong_Type) {
                let mut overflow = 0;
                let n = ffi::PyLong_AsLongLongAndOverflow(obj, &mut overflow);
                if overflow != 0 {
                    return false;
                }
                self.encoding.tags.push(b'i');
                self.encoding.tags.extend_from_slice(&n.to_le_bytes());
                return true;
            }
            self.encode(&Bound::from_borrowed_ptr(py, obj), depth)
        }
    }

    /// Appends the encoding of `obj`; false when it is not JSON-native.
    fn encode(&mut self, obj: &Bound<'py, PyAny>, depth: usize) -> bool {
        if let Ok(s) = obj.cast::<PyString>() {
            // A string that is not valid UTF-8 (a lone surrogate) is the serializer's to refuse.
            let Ok(text) = s.to_str() else {
                return false;
            };
            self.push_str(text.as_bytes(), || obj.clone());
            return true;
        }
        if depth >= MAX_DEPTH {
            return false;
        }
        if let Ok(d) = obj.cast::<PyDict>() {
            self.encoding.push_len(b'{', d.len());
            return d.iter().all(|(k, v)| {
                k.cast::<PyString>().is_ok()
                    && self.encode(&k, depth)
                    && self.encode_item(&v, depth + 1)
            });
        }
        if let Ok(l) = obj.cast::<PyList>() {
            self.encoding.push_len(b'[', l.len());
            return l.iter().all(|v| self.encode_item(&v, depth + 1));
        }
        if let Ok(t) = obj.cast::<PyTuple>() {
            self.encoding.push_len(b'[', t.len());
            return t.iter().all(|v| self.encode_item(&v, depth + 1));
        }
        let tags = &mut self.encoding.tags;
        if obj.is_none() {
            tags.push(b'n');
        } else if let Ok(b) = obj.cast::<PyBool>() {
            tags.push(if b.is_true() { b't' } else { b'f' });
        } else if obj.cast::<PyInt>().is_ok() {
            // Past 64 bits the serializer decides (it refuses such integers).
            let Ok(n) = obj.extract::<i64>() else {
                return false;
            };
            tags.push(b'i');
            tags.extend_from_slice(&n.to_le_bytes());
        } else if let Ok(f) = obj.cast::<PyFloat>() {
            tags.push(b'd');
            tags.extend_from_slice(&f.value().to_bits().to_le_bytes());
        } else {
            return false;
        }
        true
    }

    /// A string: copied when short, else held (`hold` gives the reference) and left out.
    fn push_str(&mut self, bytes: &[u8], hold: impl FnOnce() -> Bound<'py, PyAny>) {
        let e = &mut self.encoding;
        if bytes.len() <= COPIED_STR_BYTES {
            e.push_len(b's', bytes.len());
            e.tags.extend_from_slice(bytes);
        } else {
            e.push_len(b'S', bytes.len());
            e.strings.push((e.tags.len(), bytes.as_ptr(), bytes.len()));
            e.tags.extend_from_slice(&[0; 16]);
            self.held.push(hold());
        }
    }
}

thread_local! {
    /// The last walk's buffers, cleared: a walk of a long history grew them by doubling on
    /// every assembly (large reallocations, returned to the system and faulted in again).
    static SPARE: RefCell<Encoding> = RefCell::new(Encoding::default());
}

/// Buffers grown past this are not kept for the next walk: the walk of a 10 MB session
/// (about 3 MB) kept alive raised its assembly's peak from 2.2x to 2.4x its JSON, while the
/// reference workload's (466 KB of JSON) stays well under.
const SPARE_BYTES: usize = 1 << 20;

impl Drop for Walk<'_> {
    fn drop(&mut self) {
        let mut e = std::mem::take(&mut self.encoding);
        if e.tags.capacity() <= SPARE_BYTES {
            e.tags.clear();
            e.strings.clear();
            e.messages.clear();
            SPARE.with(|spare| spare.replace(e));
        }
    }
}

/// The key a message object is cached under (None: keyed by its JSON instead), for tests that
/// hold keys to the rule that messages with different JSON never share one.
pub fn object_key(message: &Bound<'_, PyAny>) -> PyResult<Option<u128>> {
    let one = PyList::new(message.py(), [message])?;
    let mut walk = Walk::new(&one, true);
    Ok(walk.encoding.keys(0)[0])
}

/// The JSON a message object's walk writes of it when the cache misses it (None: it is
/// serialized by `dump_messages` instead), for tests that hold it to the serializer's.
pub fn walked_json(message: &Bound<'_, PyAny>) -> PyResult<Option<Vec<u8>>> {
    let one = PyList::new(message.py(), [message])?;
    let walk = Walk::new(&one, true);
    Ok(walk.encoding.json(0))
}

/// The cache lookups of a walk, made with the GIL released.
pub struct Lookup<'w>(&'w mut Encoding);

/// What the lookups found: each message's key (None: keyed by its JSON) and cache entry.
pub struct Found {
    keys: Vec<Option<u128>>,
    entries: Vec<Option<Arc<Entry>>>,
}

impl<'w> Lookup<'w> {
    /// The walk's encoding, to key its messages and write their JSON without a cache lookup
    /// (a native provider's items are looked up in its own cache).
    pub fn walked(self) -> Walked<'w> {
        Walked(self.0)
    }

    pub fn run(self, seed: u64, cache: &CountCache) -> (Found, Walked<'w>) {
        let keys = self.0.keys(seed);
        let entries = cache.get_many(&keys);
        (Found { keys, entries }, Walked(self.0))
    }
}

/// A walk's encoding once looked up, from which the messages missed are written as JSON with
/// the GIL released.
pub struct Walked<'w>(&'w mut Encoding);

impl Walked<'_> {
    /// The messages that are not JSON-native (known from the walk, before any hashing).
    pub fn unkeyed(&self) -> Vec<usize> {
        let messages = &self.0.messages;
        (0..messages.len())
            .filter(|&i| messages[i].is_none())
            .collect()
    }

    /// Each message's key (None: not JSON-native). Needs no GIL.
    pub fn keys(&mut self, seed: u64) -> Vec<Option<u128>> {
        self.0.keys(seed)
    }

    /// The JSON of message `i` at its exact size, written from the walk (see
    /// `Encoding::json`) with `buffer` as scratch. Needs no GIL.
    pub fn json_of(&self, i: usize, buffer: &mut Vec<u8>) -> Option<Vec<u8>> {
        self.0.write_json(i, buffer)?;
        Some(buffer.as_slice().to_vec())
    }

    /// The JSON of each message `missed`, by index in a vector over the `n` messages; None
    /// when one cannot be written from the walk (see `Encoding::json`). Each is written into
    /// one buffer and kept at its exact size: the whole history of a first assembly is
    /// missed, and buffers grown by doubling held up to twice its JSON.
    fn json(self, n: usize, missed: &[usize]) -> Option<Vec<Option<Box<[u8]>>>> {
        let mut out = vec![None; n];
        let mut buffer = Vec::new();
        for &i in missed {
            self.0.write_json(i, &mut buffer)?;
            out[i] = Some(Box::from(buffer.as_slice()));
        }
        // The keys and the JSON are made: an encoding too large to be kept for the next walk
        // (`SPARE_BYTES`) is let go now rather than beside the whole plan.
        if self.0.tags.capacity() > SPARE_BYTES {
            self.0.tags = Vec::new();
        }
        Some(out)
    }
}

impl Found {
    fn all_found(&self) -> bool {
        self.entries.iter().all(Option::is_some)
    }

    /// The messages as the loader takes them: found, missed under an object key, or JSON to
    /// key by its bytes (`raws`: the JSON of each message not found, by index).
    fn given<'a>(&self, raws: &[Option<&'a [u8]>]) -> Result<Vec<Given<'a>>, CoreError> {
        let mut given = Vec::with_capacity(self.keys.len());
        for (i, (key, entry)) in self.keys.iter().zip(&self.entries).enumerate() {
            if let Some(entry) = entry {
                given.push(Given::Found(Arc::clone(entry)));
                continue;
            }
            let raw = raws
                .get(i)
                .copied()
                .flatten()
                .ok_or_else(|| CoreError::InvalidMessage {
                    index: Some(i),
                    reason: "the message was not serialized".into(),
                })?;
            given.push(match *key {
                Some(key) => Given::Missed { key, raw },
                None => Given::Json(raw),
            });
        }
        Ok(given)
    }
}

/// Loads the request of the caller's `messages` and runs `plan` on it. The walk holds the GIL;
/// the lookups, the JSON of the JSON-native messages not found (written from the walk) and
/// the plan run in one spell without it. Only where a message not found is not JSON-native
/// (an SDK object), or the walk cannot write it, is it serialized under the GIL, and the plan
/// then runs in a second spell.
pub fn plan<T: Send>(
    py: Python<'_>,
    messages: &Bound<'_, PyList>,
    tools: Option<&[u8]>,
    scheme: Scheme,
    limits: Limits,
    cache: &CountCache,
    plan: impl Fn(&Request<'_>) -> Result<T, CoreError> + Sync,
) -> PyResult<Result<T, CoreError>> {
    if let Err(e) = check_count(messages.len(), limits) {
        return Ok(Err(e));
    }
    let mut walk = Walk::new(messages, cache.enabled());
    let lookup = walk.look_up();
    let list = messages.clone().unbind();
    let seed = scheme.seed();
    let load = |found: &Found, given: Vec<Given<'_>>| {
        // Every element and a comma or bracket after each, as one JSON array has them.
        check_size(
            given.iter().map(|g| g.len() + 1).sum::<usize>() + 1,
            tools,
            limits,
        )?;
        let reread = Objects {
            messages: &list,
            keys: &found.keys,
            seed,
        };
        plan(&load_given(given, Some(&reread), tools, scheme, cache)?)
    };
    let first = py.detach(|| {
        let (found, walked) = lookup.run(seed, cache);
        if found.all_found() {
            let planned = found.given(&[]).and_then(|given| load(&found, given));
            return Ok(planned);
        }
        // The messages missed (the next turn's new ones) written from the walk itself, so the
        // plan runs in this same spell: taking the GIL back to serialize them made each
        // assembly wait twice for another thread's turn with it. Their JSON and their keys
        // are of one snapshot by construction.
        let missed: Vec<usize> = (0..found.entries.len())
            .filter(|&i| found.entries[i].is_none())
            .collect();
        if missed.iter().all(|&i| found.keys[i].is_some()) {
            if let Some(json) = walked.json(found.keys.len(), &missed) {
                let raws: Vec<Option<&[u8]>> = json.iter().map(Option::as_deref).collect();
                return Ok(found.given(&raws).and_then(|given| load(&found, given)));
            }
        }
        Err(found)
    });
    // Its buffers go back for the walk of the misses.
    drop(walk);
    let found = match first {
        Ok(planned) => return Ok(planned),
        Err(found) => found,
    };
    let missed: Vec<usize> = (0..found.entries.len())
        .filter(|&i| found.entries[i].is_none())
        .collect();
    let (found, dumped) = dump_missed(py, messages, found, missed, seed)?;
    let groups: Vec<(&[usize], Vec<&[u8]>)> = dumped
        .iter()
        .map(|(indices, arrays)| {
            (
                indices.as_slice(),
                arrays.iter().map(|a| a.as_bytes()).collect(),
            )
        })
        .collect();
    Ok(py.detach(|| {
        let mut raws = vec![None; found.keys.len()];
        for (indices, arrays) in groups {
            let mut elements = Vec::with_capacity(indices.len());
            for array in arrays {
                elements.extend(json_array::split(array)?);
            }
            if elements.len() != indices.len() {
                return Err(CoreError::InvalidMessage {
                    index: None,
                    reason: "the serialized messages do not match the list".into(),
                });
            }
            for (&i, raw) in indices.iter().zip(elements) {
                raws[i] = Some(raw);
            }
        }
        found.given(&raws).and_then(|given| load(&found, given))
    }))
}

/// Messages (their indices) and the JSON arrays that hold them, in that order.
type Serialized<'py> = (Vec<usize>, Vec<Bound<'py, PyBytes>>);

/// The JSON of the messages not found, in groups (see `Serialized`). The
/// JSON-native ones get their keys made again from the same snapshot the JSON is of (see
/// `dump_walked`); the others (SDK objects, mixed into a history of dicts when an agent
/// appends the SDK's reply as it came) are serialized by `dump_messages` and keyed by their
/// JSON, which also reports a message that cannot be serialized, with its index.
fn dump_missed<'py>(
    py: Python<'py>,
    messages: &Bound<'py, PyList>,
    mut found: Found,
    missed: Vec<usize>,
    seed: u64,
) -> PyResult<(Found, Vec<Serialized<'py>>)> {
    let (keyed, mut unkeyed): (Vec<usize>, Vec<usize>) =
        missed.into_iter().partition(|&i| found.keys[i].is_some());
    let mut parts = Vec::new();
    // In parts, as `dump_messages` does, so serializing a long history does not double its
    // size in memory.
    for chunk in keyed.chunks(PART_MESSAGES) {
        let items = chunk.iter().map(|&i| messages.get_item(i));
        let sub = PyList::new(py, items.collect::<PyResult<Vec<_>>>()?)?;
        match dump_walked(&sub, seed) {
            Some((keys, json)) => {
                for (&i, key) in chunk.iter().zip(keys) {
                    found.keys[i] = Some(key);
                }
                parts.push((chunk.to_vec(), vec![json]));
            }
            // Changed meanwhile into something else: serialized and keyed the other way.
            None => unkeyed.extend_from_slice(chunk),
        }
    }
    if !unkeyed.is_empty() {
        unkeyed.sort_unstable();
        for &i in &unkeyed {
            found.keys[i] = None;
        }
        let json = dump(py, messages, unkeyed.clone())?;
        parts.push((unkeyed, json));
    }
    Ok((found, parts))
}

/// The caller's messages, serialized again on demand (the GIL taken back for it).
struct Objects<'a> {
    messages: &'a Py<PyList>,
    keys: &'a [Option<u128>],
    seed: u64,
}

impl Reread for Objects<'_> {
    fn json(&self, i: usize) -> Option<Vec<u8>> {
        Python::attach(|py| {
            let messages = self.messages.bind(py);
            let one = PyList::new(py, [messages.get_item(i).ok()?]).ok()?;
            let (keys, json) = dump_walked(&one, self.seed)?;
            // The caller changed the message meanwhile: its count would be cached wrongly.
            if Some(keys[0]) != self.keys[i] {
                return None;
            }
            let raws = json_array::split(json.as_bytes()).ok()?;
            raws.first().map(|raw| raw.to_vec())
        })
    }
}
