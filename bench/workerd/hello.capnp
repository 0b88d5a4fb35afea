# workerd serving hello.js on one socket; `make bench` sets its address with --socket-addr http=…
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [(name = "hello", worker = .hello)],
  sockets = [(name = "http", address = "127.0.0.1:8080", http = (), service = "hello")],
);

const hello :Workerd.Worker = (
  modules = [(name = "hello.js", esModule = embed "hello.js")],
  compatibilityDate = "2026-11-01",
);
