// A Koishi app with one koishi-plugin-adapter-onebot bot per entry of KOISHI_BOTS (JSON:
// [{"selfId": "...", "endpoint": "ws://host:port/<self_id>/"}, ...]), all dialling the one
// forward WebSocket of a daemon serving several bots, each by its path prefix.
// tests/e2e/test_bots.py starts it (cwd: the npm install dir, NODE_PATH its node_modules)
// and reads the JSON lines it appends to KOISHI_RECORD_FILE:
//   {"ready": {"selfId": ...}}          a bot is connected
//   {"event": {"selfId": ..., ...}}     a message session, with the bot that got it
//   {"sent": {"selfId": ..., "ids": [...]}}  the answer to "ping" ("pong"), sent by that bot
//   {"error": ...}                      anything thrown on the way (the test fails on it)
const fs = require('fs')
const { App } = require('koishi')
const { OneBotBot } = require('koishi-plugin-adapter-onebot')
const { HTTP } = require('@koishijs/plugin-http')

const record = (entry) => fs.appendFileSync(process.env.KOISHI_RECORD_FILE,
                                            JSON.stringify(entry) + '\n')

const app = new App()
app.plugin(HTTP)  // the service the adapter's WebSocket client is made by
for (const bot of JSON.parse(process.env.KOISHI_BOTS)) {
  app.plugin(OneBotBot, {
    protocol: 'ws',
    endpoint: bot.endpoint,
    selfId: bot.selfId,
    token: process.env.KOISHI_TOKEN,
    retryTimes: 2,
  })
}
app.on('login-updated', ({ bot }) => {
  if (bot.status === 1) record({ ready: { selfId: bot.selfId } })
})
app.on('message', async (session) => {
  try {
    record({ event: { selfId: session.selfId, id: session.messageId, content: session.content,
                      userId: session.userId, channelId: session.channelId } })
    if (!/\bping$/.test(session.content)) return
    const ids = await session.send('pong')
    record({ sent: { selfId: session.selfId, ids } })
  } catch (error) {
    record({ error: String(error && error.stack || error) })
  }
})
process.on('unhandledRejection', (error) => record({ error: String(error && error.stack || error) }))
app.start().catch((error) => { record({ error: String(error) }); process.exit(1) })
