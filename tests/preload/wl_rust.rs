// SPDX-License-Identifier: MIT OR Apache-2.0
// wl_rust: a Rust program's heap goes through malloc/calloc/realloc too.
// make_vecs allocates 100 zeroed buffers of 1000..1099 bytes (104950
// bytes, through calloc) and grows a Vec of them.
#[inline(never)]
fn make_vecs(n: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for i in 0..n {
        out.push(vec![0u8; 1000 + i]);
    }
    out
}

fn main() {
    let v = make_vecs(100);
    let total: usize = v.iter().map(|x| x.len()).sum();
    let s: String = (0..1000).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    println!("total={} len={}", total, s.len());
}
