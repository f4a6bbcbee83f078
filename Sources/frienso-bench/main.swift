import Bench

// `frienso-bench`: its commands live in the `Bench` library (`BenchCommand`), as every
// executable's logic lives in a library.
await BenchCommand.start()
