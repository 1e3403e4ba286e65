#!/usr/bin/env node
// The failover endpoint of the local postgres-ha pair (scripts/services.d/clusters.sh, ADR 0037): a
// TCP forwarder on 127.0.0.1 that stands where a cloud database endpoint or a Patroni-managed proxy
// stands. Every new client connection goes to the port written in <target file> (read per
// connection); SIGHUP re-reads it and drops every open connection, as an endpoint does when it moves
// to a promoted standby (clients see a broken connection and reconnect, to the new primary).
// A target that refuses makes the client's connection close at once, like a dead primary's endpoint.
//
//   node scripts/ha-proxy.mjs <listen port> <target file>
import { readFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';

const [listenPort, targetFile] = process.argv.slice(2);
if (!/^\d+$/.test(listenPort ?? '') || !targetFile) {
  console.error('usage: node scripts/ha-proxy.mjs <listen port> <target file>');
  process.exit(2);
}

const targetPort = () => Number(readFileSync(targetFile, 'utf8').trim());
const open = new Set();
let target = targetPort();

const server = createServer((client) => {
  const upstream = connect(target, '127.0.0.1');
  const pair = [client, upstream];
  for (const socket of pair) {
    open.add(socket);
    socket.setNoDelay(true);
    socket.on('error', () => socket.destroy());
    socket.on('close', () => {
      open.delete(socket);
      for (const other of pair) other.destroy();
    });
  }
  client.pipe(upstream).pipe(client);
});

process.on('SIGHUP', () => {
  const previous = target;
  target = targetPort();
  const dropped = open.size / 2;
  for (const socket of open) socket.destroy();
  console.log(
    `${new Date().toISOString()} target ${previous} -> ${target}; dropped ${dropped} connection(s)`,
  );
});
process.on('SIGTERM', () => process.exit(0));

server.listen(Number(listenPort), '127.0.0.1', () =>
  console.log(`${new Date().toISOString()} listening on 127.0.0.1:${listenPort} -> 127.0.0.1:${target}`),
);
