//! The sandbox a customization's Lua script runs in: Lua 5.1 (as gopher-lua, Karmada's
//! VM, implements it) with the base, table, string and math libraries and Karmada's
//! `kube` library, and nothing that reaches the world: no `os`, `io`, `debug`,
//! `package`, `print`, no loading of code or bytecode, no metatables, no randomness.
//!
//! Every call is bounded: an instruction budget (counted, not timed, so the same script
//! on the same object fails or succeeds the same way on every machine) and a memory
//! limit. Each call runs the compiled script in a fresh environment whose libraries are
//! read-only, so one call can leave nothing behind for the next: the result depends only
//! on the script and its arguments, as the render's purity needs.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use mlua::{Function, HookTriggers, Lua, LuaOptions, LuaSerdeExt, MultiValue, StdLib, Table, Value as Lua_, VmState};
use serde_json::Value;

use super::convert;

/// Instructions one call may run: about 0.1 s of a tight loop on this project's machine
/// (Karmada's VM stops a call after one second of wall time).
pub const INSTRUCTION_BUDGET: u64 = 20_000_000;
/// Memory one VM may hold, its script and the objects of one call included.
pub const MEMORY_LIMIT: usize = 64 << 20;
/// Instructions between two checks of the budget.
const CHECK_EVERY: u32 = 10_000;
/// VMs kept per thread (one per script); past this the cache starts afresh.
const KEPT: usize = 64;

/// Base functions a script may not call (Karmada's list, plus what reaches stdout or
/// the collector, or loads code): each is replaced by one that raises an error.
const REFUSED: &[&str] = &[
    "collectgarbage",
    "dofile",
    "getfenv",
    "getmetatable",
    "load",
    "loadfile",
    "loadstring",
    "rawequal",
    "rawget",
    "rawset",
    "setfenv",
    "setmetatable",
    "module",
    "newproxy",
    "print",
    "gcinfo",
];

/// A compiled script in its own VM.
struct Vm {
    lua: Lua,
    chunk: Function,
    /// The read-only globals each call's environment falls back to.
    globals: Table,
    /// mlua's array metatable, marking the tables made from JSON arrays.
    array: Table,
    spent: Arc<AtomicU64>,
}

thread_local! {
    static VMS: RefCell<HashMap<Arc<str>, Vm>> = RefCell::new(HashMap::new());
}

/// Checks that `script` compiles in the sandbox (the load of a customization).
pub fn compile(script: &str) -> Result<(), String> {
    Vm::new(script).map(drop)
}

/// Runs `script`, then calls its global `function` with `args`; what it returns, as
/// JSON (nil is null). Errors are the script's own message or the bound it passed.
pub fn call(script: &Arc<str>, function: &str, args: &[&Value]) -> Result<Vec<Value>, String> {
    VMS.with(|vms| {
        let mut vms = vms.borrow_mut();
        if !vms.contains_key(script) {
            if vms.len() >= KEPT {
                vms.clear();
            }
            vms.insert(script.clone(), Vm::new(script)?);
        }
        let result = vms[script].call(function, args);
        // A VM that failed may be anywhere (out of memory mid-table): start afresh.
        if result.is_err() {
            vms.remove(script);
        }
        result
    })
}

impl Vm {
    fn new(script: &str) -> Result<Vm, String> {
        let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH, LuaOptions::default())
            .map_err(|e| e.to_string())?;
        lua.set_memory_limit(MEMORY_LIMIT).map_err(|e| e.to_string())?;
        let spent = Arc::new(AtomicU64::new(0));
        let counter = spent.clone();
        lua.set_hook(HookTriggers::new().every_nth_instruction(CHECK_EVERY), move |_, _| {
            if counter.fetch_add(u64::from(CHECK_EVERY), Ordering::Relaxed) >= INSTRUCTION_BUDGET {
                return Err(mlua::Error::runtime(format!(
                    "ran past its budget of {INSTRUCTION_BUDGET} instructions (an endless loop?)"
                )));
            }
            Ok(VmState::Continue)
        })
        .map_err(|e| e.to_string())?;
        let globals = sandbox(&lua).map_err(|e| e.to_string())?;
        let chunk = lua.load(script).set_name("script").into_function().map_err(|e| clean(&e))?;
        let array = lua.array_metatable();
        Ok(Vm { lua, chunk, globals, array, spent })
    }

    fn call(&self, function: &str, args: &[&Value]) -> Result<Vec<Value>, String> {
        self.spent.store(0, Ordering::Relaxed);
        // Only the script's own work is limited: the environment and the arguments are
        // built, and the results read, with the limit lifted (while a limit is set,
        // mlua protects every call into Lua, which made building a Deployment's table
        // cost more than running the script).
        let limited = |on: bool| self.lua.set_memory_limit(if on { MEMORY_LIMIT } else { 0 }).map(drop);
        let run = || -> mlua::Result<Vec<Value>> {
            limited(false)?;
            let env = self.lua.create_table()?;
            let meta = self.lua.create_table()?;
            meta.set("__index", self.globals.clone())?;
            env.set_metatable(Some(meta))?;
            env.set("_G", env.clone())?;
            self.chunk.set_environment(env.clone())?;
            let args: MultiValue =
                args.iter().map(|a| convert::to_lua(&self.lua, &self.array, a)).collect::<mlua::Result<_>>()?;
            limited(true)?;
            self.chunk.call::<()>(())?;
            let Lua_::Function(f) = env.get::<Lua_>(function)? else {
                return Err(mlua::Error::runtime(format!("the script defines no function {function}")));
            };
            let returned: MultiValue = f.call(args)?;
            limited(false)?;
            returned.into_iter().map(|v| convert::from_lua(&self.lua, &self.array, v)).collect()
        };
        let result = run().map_err(|e| clean(&e));
        // What the call made is garbage now. Lua 5.1 does not collect before it reports
        // running out, so collect once a quarter of the limit is held: a call never
        // fails on what earlier calls left behind.
        if self.lua.used_memory() > MEMORY_LIMIT / 4 {
            let _ = self.lua.gc_collect();
        }
        let _ = limited(true);
        result
    }
}

/// The read-only globals: the libraries behind proxies that refuse writes, the
/// refused functions raising errors, `require` serving only `kube`.
fn sandbox(lua: &Lua) -> mlua::Result<Table> {
    let globals = lua.globals();
    for name in REFUSED {
        let message = format!("{name} is not allowed in a resource interpreter script");
        globals.set(
            *name,
            lua.create_function(move |_, _: MultiValue| Err::<(), _>(mlua::Error::runtime(message.clone())))?,
        )?;
    }
    // Not deterministic, or a way to bytecode.
    let math: Table = globals.get("math")?;
    math.set("random", Lua_::Nil)?;
    math.set("randomseed", Lua_::Nil)?;
    let string: Table = globals.get("string")?;
    string.set("dump", Lua_::Nil)?;
    let kube = super::kube::library(lua)?;
    let kube = read_only(lua, kube)?;
    globals.set(
        "require",
        lua.create_function(move |_, name: String| match name.as_str() {
            "kube" => Ok(kube.clone()),
            _ => Err(mlua::Error::runtime(format!("module {name:?} is not available (only \"kube\" is)"))),
        })?,
    )?;
    let shared = lua.create_table()?;
    for pair in globals.pairs::<Lua_, Lua_>() {
        let (key, value) = pair?;
        let value = match value {
            Lua_::Table(t) if key.as_string().is_some_and(|k| k.as_bytes() != b"_G") => Lua_::Table(read_only(lua, t)?),
            Lua_::Table(_) => continue,
            other => other,
        };
        shared.set(key, value)?;
    }
    read_only(lua, shared)
}

/// An empty table reading through to `inner` and refusing every write.
fn read_only(lua: &Lua, inner: Table) -> mlua::Result<Table> {
    let proxy = lua.create_table()?;
    let meta = lua.create_table()?;
    meta.set("__index", inner)?;
    meta.set(
        "__newindex",
        lua.create_function(|_, _: MultiValue| {
            Err::<(), _>(mlua::Error::runtime("the libraries are read-only in a resource interpreter script"))
        })?,
    )?;
    meta.set("__metatable", false)?;
    proxy.set_metatable(Some(meta))?;
    Ok(proxy)
}

/// An error's message without Rust's wrapping or the traceback.
fn clean(error: &mlua::Error) -> String {
    let text = match error {
        mlua::Error::CallbackError { cause, .. } => return clean(cause),
        mlua::Error::MemoryError(_) => return format!("ran past its memory limit of {} MiB", MEMORY_LIMIT >> 20),
        mlua::Error::RuntimeError(m) | mlua::Error::SyntaxError { message: m, .. } => m.clone(),
        other => other.to_string(),
    };
    text.lines().next().unwrap_or_default().trim_start_matches("runtime error: ").to_owned()
}
