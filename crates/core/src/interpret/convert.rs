#![allow(unsafe_code)]
//! JSON to Lua tables and back, on Lua's stack in one protected call each way.
//!
//! mlua's serde bridge does the same through its safe API, which takes a reference slot
//! per value and a protected call per table entry: for a Deployment that cost more than
//! the script it fed (docs/performance.md, "The resource interpreter"). The mapping is
//! the one that bridge makes, so a script sees what it saw before:
//! - objects become tables, arrays become tables with mlua's array metatable (so an
//!   empty array comes back `[]`), null becomes nil (a key whose value is null is left
//!   out), numbers become Lua numbers;
//! - back, a table with the array metatable or a positive length is an array of its
//!   first `#t` elements, any other table an object (number keys written as JSON
//!   writes them, other keys skipped), an integral number an integer, a function or
//!   other value null.
//!
//! Soundness: a Lua error raised inside these calls would unwind by `longjmp` past the
//! Rust frames below it. Pushing can raise only out-of-memory, and its frames own
//! nothing (references and integers), so nothing is skipped that needed dropping.
//! Reading allocates nothing in Lua once the stack has grown for the deepest table, which
//! is done first, before any Rust value exists; it never indexes through a metatable.

use std::ffi::c_int;

use mlua::{Lua, Table, Value as Lua_, ffi};
use serde_json::{Map, Number, Value};

/// Nesting past this is refused both ways (on the way back it is also how a table that
/// holds itself is caught).
const DEPTH: usize = 200;
/// Stack slots reading a table of `DEPTH` levels takes (a key, a value and a metatable
/// per level), with room to spare.
const STACK: c_int = 3 * DEPTH as c_int + 16;

/// `value` as a Lua value of `lua`; `array` is mlua's array metatable.
pub fn to_lua(lua: &Lua, array: &Table, value: &Value) -> mlua::Result<Lua_> {
    let mut too_deep = false;
    // SAFETY: the closure keeps the stack balanced (the metatable in, the value out); its
    // frames own nothing (module comment).
    let pushed = unsafe {
        lua.exec_raw::<Lua_>(array, |state| {
            too_deep = !push(state, value, 0);
            ffi::lua_remove(state, 1);
        })
    }?;
    if too_deep {
        return Err(mlua::Error::runtime(format!("the object is nested deeper than {DEPTH} levels")));
    }
    Ok(pushed)
}

/// A Lua value as JSON; `array` is mlua's array metatable.
pub fn from_lua(lua: &Lua, array: &Table, value: Lua_) -> mlua::Result<Value> {
    let mut read = None;
    // SAFETY: the closure reads the two arguments in place; the stack is grown for the
    // deepest table before anything is read, so nothing after can raise (module comment).
    unsafe {
        lua.exec_raw::<()>((array, value), |state| {
            if ffi::lua_checkstack(state, STACK) != 0 {
                read = tree(state, 2, 0);
            }
            ffi::lua_settop(state, 0);
        })
    }?;
    read.ok_or_else(|| {
        mlua::Error::runtime(format!(
            "the script returned a table nested deeper than {DEPTH} levels, or one holding itself"
        ))
    })
}

/// Pushes `value`; the array metatable is at stack index 1. False (and nil pushed) past
/// the depth bound or when the stack cannot grow.
unsafe fn push(state: *mut ffi::lua_State, value: &Value, depth: usize) -> bool {
    // SAFETY (for the block): `state` is a live Lua state inside a protected call.
    unsafe {
        if depth > DEPTH || ffi::lua_checkstack(state, 4) == 0 {
            ffi::lua_pushnil(state);
            return false;
        }
        match value {
            Value::Null => ffi::lua_pushnil(state),
            Value::Bool(b) => ffi::lua_pushboolean(state, c_int::from(*b)),
            Value::Number(n) => ffi::lua_pushnumber(state, n.as_f64().unwrap_or(0.0)),
            Value::String(s) => push_str(state, s),
            Value::Array(items) => {
                ffi::lua_createtable(state, c_int::try_from(items.len()).unwrap_or(0), 0);
                for (i, item) in items.iter().enumerate() {
                    let fine = push(state, item, depth + 1);
                    ffi::lua_rawseti(state, -2, ffi::lua_Integer::try_from(i + 1).unwrap_or(ffi::lua_Integer::MAX));
                    if !fine {
                        return false;
                    }
                }
                ffi::lua_pushvalue(state, 1);
                ffi::lua_setmetatable(state, -2);
            }
            Value::Object(fields) => {
                ffi::lua_createtable(state, 0, c_int::try_from(fields.len()).unwrap_or(0));
                for (key, field) in fields {
                    push_str(state, key);
                    let fine = push(state, field, depth + 1);
                    ffi::lua_rawset(state, -3);
                    if !fine {
                        return false;
                    }
                }
            }
        }
        true
    }
}

unsafe fn push_str(state: *mut ffi::lua_State, s: &str) {
    // SAFETY: the bytes are copied by Lua before the call returns.
    unsafe {
        ffi::lua_pushlstring(state, s.as_ptr().cast(), s.len());
    }
}

/// The value at `index` as JSON (the array metatable is at stack index 1); `None` past
/// the depth bound.
unsafe fn tree(state: *mut ffi::lua_State, index: c_int, depth: usize) -> Option<Value> {
    // SAFETY (for the block): `state` is a live Lua state inside a protected call and
    // `index` an absolute index of a value on its stack.
    unsafe {
        Some(match ffi::lua_type(state, index) {
            ffi::LUA_TBOOLEAN => Value::Bool(ffi::lua_toboolean(state, index) != 0),
            ffi::LUA_TNUMBER => number(ffi::lua_tonumber(state, index)),
            ffi::LUA_TSTRING => Value::String(string(state, index)),
            ffi::LUA_TTABLE if depth < DEPTH => table(state, index, depth)?,
            ffi::LUA_TTABLE => return None,
            _ => Value::Null,
        })
    }
}

unsafe fn table(state: *mut ffi::lua_State, index: c_int, depth: usize) -> Option<Value> {
    // SAFETY (for the block): as for `tree`; every push below is popped before return.
    unsafe {
        let length = ffi::lua_objlen(state, index);
        let mut is_array = length > 0;
        if ffi::lua_getmetatable(state, index) != 0 {
            is_array |= ffi::lua_rawequal(state, -1, 1) != 0;
            ffi::lua_pop(state, 1);
        }
        if is_array {
            let mut items = Vec::with_capacity(length);
            for i in 1..=length {
                ffi::lua_rawgeti(state, index, ffi::lua_Integer::try_from(i).ok()?);
                let item = tree(state, ffi::lua_gettop(state), depth + 1);
                ffi::lua_pop(state, 1);
                items.push(item?);
            }
            return Some(Value::Array(items));
        }
        let mut fields = Map::new();
        ffi::lua_pushnil(state);
        while ffi::lua_next(state, index) != 0 {
            let top = ffi::lua_gettop(state);
            let key = match ffi::lua_type(state, top - 1) {
                ffi::LUA_TSTRING => Some(string(state, top - 1)),
                ffi::LUA_TNUMBER => Some(number(ffi::lua_tonumber(state, top - 1)).to_string()),
                _ => None,
            };
            let field = tree(state, top, depth + 1);
            ffi::lua_pop(state, 1);
            let Some(field) = field else {
                ffi::lua_pop(state, 1);
                return None;
            };
            if let Some(key) = key {
                fields.insert(key, field);
            }
        }
        Some(Value::Object(fields))
    }
}

unsafe fn string(state: *mut ffi::lua_State, index: c_int) -> String {
    let mut len = 0;
    // SAFETY: the value at `index` is a string (checked by the caller), so Lua converts
    // nothing in place and the bytes live while it stays on the stack.
    unsafe {
        let bytes = ffi::lua_tolstring(state, index, &mut len);
        String::from_utf8_lossy(std::slice::from_raw_parts(bytes.cast::<u8>(), len)).into_owned()
    }
}

/// An integral number as an integer, as mlua reads Lua 5.1's numbers.
fn number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9.2e18 {
        return Value::from(n as i64);
    }
    Number::from_f64(n).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use mlua::{Lua, LuaSerdeExt};
    use serde_json::{Value, json};

    use super::*;

    fn round_trip(lua: &Lua, value: &Value) -> Value {
        let array = lua.array_metatable();
        let pushed = to_lua(lua, &array, value).unwrap();
        from_lua(lua, &array, pushed).unwrap()
    }

    #[test]
    fn json_comes_back_as_it_went_in_but_for_null_fields() {
        let lua = Lua::new();
        let object = json!({
            "spec": {"replicas": 6, "ratio": 0.25, "paused": false, "empty": [], "none": {},
                     "list": [1, "two", {"three": 3}], "name": "ünïcode ✓", "big": 9007199254740993_i64},
            "gone": null
        });
        let mut expected = object.clone();
        expected.as_object_mut().unwrap().remove("gone");
        // 2^53 + 1 is not a double: Lua holds the nearest one, as gopher-lua does.
        expected["spec"]["big"] = json!(9007199254740992_i64);
        assert_eq!(round_trip(&lua, &object), expected);
    }

    #[test]
    fn what_a_script_builds_reads_as_mlua_reads_it() {
        let lua = Lua::new();
        let array = lua.array_metatable();
        let built: mlua::Value = lua
            .load(r#"return {seq = {"a", "b"}, map = {x = 1}, [3] = "three", f = function() end, n = 2.5, e = {}}"#)
            .eval()
            .unwrap();
        assert_eq!(
            from_lua(&lua, &array, built).unwrap(),
            json!({"seq": ["a", "b"], "map": {"x": 1}, "3": "three", "f": null, "n": 2.5, "e": {}})
        );
        // A table with a length is an array of its first #t elements.
        let mixed: mlua::Value = lua.load(r#"return {"a", "b", extra = true}"#).eval().unwrap();
        assert_eq!(from_lua(&lua, &array, mixed).unwrap(), json!(["a", "b"]));
    }

    #[test]
    fn too_deep_and_self_holding_tables_are_refused() {
        let lua = Lua::new();
        let array = lua.array_metatable();
        let mut deep = json!(1);
        for _ in 0..DEPTH + 5 {
            deep = json!({ "a": deep });
        }
        let error = to_lua(&lua, &array, &deep).unwrap_err().to_string();
        assert!(error.contains("nested deeper"), "{error}");
        let looped: mlua::Value = lua.load("local t = {}; t.self = t; return t").eval().unwrap();
        let error = from_lua(&lua, &array, looped).unwrap_err().to_string();
        assert!(error.contains("holding itself"), "{error}");
        // The state is usable afterwards.
        assert_eq!(round_trip(&lua, &json!({"ok": [true]})), json!({"ok": [true]}));
    }
}
