// KafkaJS producing over OAUTHBEARER with tokens from an OpenID Connect issuer's token endpoint
// (client credentials, HTTP Basic, the issuer's CA trusted), pausing between sends so that each
// pause outlives the broker's session (KIP-368: the token's expiry). Prints one JSON line: the
// values sent, how many tokens were fetched, how many connections were opened and how many
// OAUTHBEARER authentications succeeded (more authentications than connections: re-authentication
// on open connections). Settings come from the environment (see the Python test).
'use strict'
const fs = require('fs')
const https = require('https')
const { Kafka, logLevel } = require('kafkajs')

const env = process.env
const events = { tokens: 0, connecting: 0, authenticated: 0 }

function fetchToken() {
  return new Promise((resolve, reject) => {
    const body = 'grant_type=client_credentials&scope=kafka'
    const url = new URL(env.TOKEN_URL)
    const request = https.request(
      {
        hostname: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        ca: fs.readFileSync(env.CA_FILE),
        auth: `${env.CLIENT_ID}:${env.CLIENT_SECRET}`,
        headers: {
          'Content-Type': 'application/x-www-form-urlencoded',
          'Content-Length': Buffer.byteLength(body),
        },
      },
      (response) => {
        let data = ''
        response.on('data', (chunk) => (data += chunk))
        response.on('end', () => {
          if (response.statusCode !== 200) return reject(new Error(`token endpoint: ${response.statusCode} ${data}`))
          events.tokens++
          resolve(JSON.parse(data).access_token)
        })
      }
    )
    request.on('error', reject)
    request.end(body)
  })
}

const logCreator = () => ({ log }) => {
  if (log.message === 'Connecting') events.connecting++
  if (log.message === 'SASL OAUTHBEARER authentication successful') events.authenticated++
}

const kafka = new Kafka({
  clientId: 'kafkajs-reauth',
  brokers: [env.BROKERS],
  sasl: { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: await fetchToken() }) },
  reauthenticationThreshold: Number(env.THRESHOLD_MS),
  logLevel: logLevel.DEBUG,
  logCreator,
  retry: { retries: 3 },
})

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function main() {
  const producer = kafka.producer({ allowAutoTopicCreation: true })
  await producer.connect()
  const sent = []
  for (let i = 0; i < Number(env.ROUNDS); i++) {
    if (i > 0) await sleep(Number(env.PAUSE_MS))
    await producer.send({ topic: env.TOPIC, acks: -1, messages: [{ value: `m${i}` }] })
    sent.push(`m${i}`)
  }
  await producer.disconnect()
  console.log(JSON.stringify({ sent, ...events }))
}

main().catch((error) => {
  console.log(JSON.stringify({ error: String(error), ...events }))
  process.exit(1)
})
