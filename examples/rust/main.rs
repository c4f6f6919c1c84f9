// SPDX-License-Identifier: MIT OR Apache-2.0
//
// A Rust program profiled through the system allocator, with spans opened
// through culpert's C API. The functions are looked up at run time with
// dlsym, so the program needs no link dependency and no crates: without
// libculpert the spans do nothing, under `culpert run` they appear.
//
//   rustc --edition 2021 -O -g main.rs -o rust_spans && culpert run -- ./rust_spans
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr};

extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

type EnterFn = unsafe extern "C" fn(*const c_char);
type ExitFn = unsafe extern "C" fn();

/// The span API if libculpert is loaded, looked up once.
struct Culpert {
    enter: Option<EnterFn>,
    exit: Option<ExitFn>,
}

impl Culpert {
    fn load() -> Culpert {
        // RTLD_DEFAULT is the null handle on glibc.
        let find = |name: &CStr| unsafe { dlsym(std::ptr::null_mut(), name.as_ptr()) };
        let enter = find(c"culpert_span_enter");
        let exit = find(c"culpert_span_exit");
        unsafe {
            Culpert {
                enter: (!enter.is_null()).then(|| std::mem::transmute::<*mut c_void, EnterFn>(enter)),
                exit: (!exit.is_null()).then(|| std::mem::transmute::<*mut c_void, ExitFn>(exit)),
            }
        }
    }

    /// Open a span that closes when the returned guard is dropped.
    fn span(&self, name: &'static CStr) -> SpanGuard<'_> {
        if let Some(enter) = self.enter {
            unsafe { enter(name.as_ptr()) };
        }
        SpanGuard { culpert: self }
    }
}

struct SpanGuard<'a> {
    culpert: &'a Culpert,
}

impl Drop for SpanGuard<'_> {
    fn drop(&mut self) {
        if let (Some(_), Some(exit)) = (self.culpert.enter, self.culpert.exit) {
            unsafe { exit() };
        }
    }
}

fn tokenize(c: &Culpert, text: &str) -> Vec<String> {
    let _s = c.span(c"tokenize");
    text.split_whitespace().map(|w| w.to_lowercase()).collect()
}

fn count_words(c: &Culpert, words: &[String]) -> HashMap<String, usize> {
    let _s = c.span(c"count_words");
    let mut counts = HashMap::new();
    for w in words {
        *counts.entry(w.clone()).or_insert(0) += 1;
    }
    counts
}

fn main() {
    let c = Culpert::load();
    let text = "the quick brown fox jumps over the lazy dog ".repeat(20000);
    let _s = c.span(c"word_count");
    let words = tokenize(&c, &text);
    let counts = count_words(&c, &words);
    println!("{} words, {} distinct", words.len(), counts.len());
}
