//! `wasm-loop-count IN.wasm OUT.wasm > SITES.tsv`: writes IN with an i64
//! counter at every function entry and every loop header, the places where
//! wasmtime's Cranelift code checks the epoch (wasmtime-internal-cranelift
//! 48: `epoch_function_entry`, `translate_loop_header`). Counter N is the
//! mutable global exported as `count_N`; stdout gets one line per counter:
//! `N<TAB>function name<TAB>entry|loop K`. Names come from IN's name
//! section (build-wasm.sh keeps a named copy of the artifact).

use walrus::ir::{BinaryOp, Binop, Const, GlobalGet, GlobalSet, Instr, InstrSeqId, Value};
use walrus::{ConstExpr, FunctionId, LocalFunction, Module, ValType};

/// The bodies of every `loop` in `seq` and in the blocks nested in it.
fn loop_bodies(f: &LocalFunction, seq: InstrSeqId, out: &mut Vec<InstrSeqId>) {
    for (instr, _) in &f.block(seq).instrs {
        match instr {
            Instr::Block(b) => loop_bodies(f, b.seq, out),
            Instr::Loop(l) => {
                out.push(l.seq);
                loop_bodies(f, l.seq, out);
            }
            Instr::IfElse(i) => {
                loop_bodies(f, i.consequent, out);
                loop_bodies(f, i.alternative, out);
            }
            _ => {}
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, input, output] = args.as_slice() else {
        return Err("usage: wasm-loop-count IN.wasm OUT.wasm > SITES.tsv".into());
    };
    let mut module = Module::from_file(input)?;
    // Per function: its entry block first, then its loop bodies.
    let sites: Vec<(FunctionId, Vec<InstrSeqId>)> = module
        .funcs
        .iter_local()
        .map(|(id, f)| {
            let mut seqs = vec![f.entry_block()];
            loop_bodies(f, f.entry_block(), &mut seqs);
            (id, seqs)
        })
        .collect();
    let mut n = 0;
    for (id, seqs) in sites {
        let name = module.funcs.get(id).name.clone().unwrap_or_else(|| format!("function[{}]", id.index()));
        for (k, seq) in seqs.into_iter().enumerate() {
            let counter = module.globals.add_local(ValType::I64, true, false, ConstExpr::Value(Value::I64(0)));
            module.exports.add(&format!("count_{n}"), counter);
            let place = if k == 0 { "entry".to_string() } else { format!("loop {k}") };
            println!("{n}\t{name}\t{place}");
            n += 1;
            // counter += 1, before the sequence's first instruction (stack-neutral,
            // so loops with parameters keep them).
            let mut body = module.funcs.get_mut(id).kind.unwrap_local_mut().builder_mut().instr_seq(seq);
            body.instr_at(0, GlobalSet { global: counter });
            body.instr_at(0, Binop { op: BinaryOp::I64Add });
            body.instr_at(0, Const { value: Value::I64(1) });
            body.instr_at(0, GlobalGet { global: counter });
        }
    }
    module.emit_wasm_file(output)?;
    Ok(())
}
