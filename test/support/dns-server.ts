import dns2 from 'dns2';

/**
 * A real DNS server on loopback (UDP, the `dns2` package) answering TXT queries from a table the
 * test edits; any other name answers NXDOMAIN. `server` is what PGWARD_DNS_SERVERS takes.
 */
export interface TestDnsServer {
  readonly server: string;
  /** TXT records by lowercase name; each record is one or more character-strings. */
  readonly txt: Map<string, string[][]>;
  /** Names asked, in order. */
  readonly asked: string[];
  close(): Promise<void>;
}

export async function startDnsServer(): Promise<TestDnsServer> {
  const txt = new Map<string, string[][]>();
  const asked: string[] = [];
  const { Packet } = dns2;
  const server = dns2.createServer({
    udp: true,
    handle: (request, send) => {
      const response = Packet.createResponseFromRequest(request);
      const question = request.questions[0] as { name: string; type: number } | undefined;
      const name = question?.name.toLowerCase() ?? '';
      asked.push(name);
      const records = question?.type === Packet.TYPE.TXT ? txt.get(name) : undefined;
      if (records) {
        for (const data of records) response.answers.push({ name: question!.name, type: Packet.TYPE.TXT, class: Packet.CLASS.IN, ttl: 1, data } as unknown as (typeof response.answers)[number]);
      } else {
        (response as unknown as { header: { rcode: number } }).header.rcode = 3;
      }
      send(response);
    },
  });
  await server.listen({ udp: { port: 0, address: '127.0.0.1' } });
  const port = server.addresses().udp!.port;
  return { server: `127.0.0.1:${port}`, txt, asked, close: () => server.close() };
}
